//! Tokenizer for Go template text.
//!
//! Parse errors report the line of the last token the parser looked at, and Go's lexer decides
//! where tokens (and their lines) begin, how trim markers eat whitespace and which error stops the
//! scan. Those observable details are reproduced here token for token, so that error messages such
//! as `template: x:3: unexpected "}" in operand` match Go's.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ItemType {
    Error,
    Bool,
    Char,
    CharConstant,
    Complex,
    Assign,
    Declare,
    Eof,
    Field,
    Identifier,
    LeftDelim,
    LeftParen,
    Number,
    Pipe,
    RawString,
    RightDelim,
    RightParen,
    Space,
    String,
    Text,
    Variable,
    // keywords
    Block,
    Break,
    Continue,
    Dot,
    Define,
    Else,
    End,
    If,
    Nil,
    Range,
    Template,
    With,
}

impl ItemType {
    fn is_keyword(self) -> bool {
        matches!(
            self,
            ItemType::Block
                | ItemType::Break
                | ItemType::Continue
                | ItemType::Dot
                | ItemType::Define
                | ItemType::Else
                | ItemType::End
                | ItemType::If
                | ItemType::Nil
                | ItemType::Range
                | ItemType::Template
                | ItemType::With
        )
    }
}

/// A token: 16 bytes, so it travels in two registers. Its text is `input[pos..end]`
/// ([`Lexer::val`]); an `Error` item's message is [`Lexer::error`] (there is at most one: lexing
/// stops there). Offsets are `u32`: [`Lexer::new`]'s caller rejects longer texts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Item {
    pub typ: ItemType,
    pos: u32,
    end: u32,
    line: u32,
}

impl Item {
    /// Byte offset of the token in the template text.
    pub fn pos(self) -> usize {
        self.pos as usize
    }

    /// Line of the token's first byte.
    pub fn line(self) -> usize {
        self.line as usize
    }
}

impl Item {
    /// A placeholder before the first token (and the lexer's initial `last`).
    pub(crate) const EOF: Item = Item {
        typ: ItemType::Eof,
        pos: 0,
        end: 0,
        line: 1,
    };
}

/// The longest template text the lexer handles (its offsets are `u32`).
pub(crate) const MAX_TEXT: usize = u32::MAX as usize;

const LEFT: &[u8] = b"{{";
const RIGHT: &[u8] = b"}}";

/// Position of the first `{{`: `memchr` finds each `{` with SIMD, so the long texts between
/// actions cost little.
fn find_left_delim(b: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'{', &b[from..]) {
        let at = from + i;
        if b.get(at + 1) == Some(&b'{') {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// Newlines in `b` (line numbers of error messages), counted with SIMD.
fn count_newlines(b: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', b).count()
}

/// ASCII letters, digits and `_`, by byte value (the lexer's hottest test).
static WORD: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        t[i] = c.is_ascii_alphanumeric() || c == b'_';
        i += 1;
    }
    t
};

/// Go's `isSpace` on a byte: the four ASCII spaces (no other byte starts a space character).
fn is_space_byte(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_alnum(c: char) -> bool {
    if c.is_ascii() {
        return c == '_' || c.is_ascii_alphanumeric();
    }
    c.is_alphabetic() || c.is_numeric()
}

fn has_left_trim(b: &[u8]) -> bool {
    b.len() >= 2 && b[0] == b'-' && is_space_byte(b[1])
}

fn has_right_trim(b: &[u8]) -> bool {
    b.len() >= 2 && is_space_byte(b[0]) && b[1] == b'-'
}

fn trim_right_len(b: &[u8]) -> usize {
    b.iter().rev().take_while(|c| is_space_byte(**c)).count()
}

fn trim_left_len(b: &[u8]) -> usize {
    b.iter().take_while(|c| is_space_byte(**c)).count()
}

/// The item type of an identifier-shaped word: a keyword, a boolean or a plain identifier. Most
/// words are function names, which the length and first-byte test sends to `Identifier` without
/// comparing strings.
fn keyword(w: &[u8]) -> ItemType {
    if w.len() < 2
        || w.len() > 8
        || !matches!(
            w[0],
            b'b' | b'c' | b'd' | b'e' | b'f' | b'i' | b'n' | b'r' | b't' | b'w'
        )
    {
        return ItemType::Identifier;
    }
    match w {
        b"block" => ItemType::Block,
        b"break" => ItemType::Break,
        b"continue" => ItemType::Continue,
        b"define" => ItemType::Define,
        b"else" => ItemType::Else,
        b"end" => ItemType::End,
        b"if" => ItemType::If,
        b"range" => ItemType::Range,
        b"nil" => ItemType::Nil,
        b"template" => ItemType::Template,
        b"with" => ItemType::With,
        b"true" | b"false" => ItemType::Bool,
        _ => ItemType::Identifier,
    }
}

/// What the next pull of [`Lexer::next_item`] starts with. Go's lexer (since it stopped using a
/// goroutine) is pulled the same way; the other states of its state machine are the methods
/// called from these.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Text,
    /// Text was just emitted and `{{` is at `pos`.
    LeftDelim,
    InsideAction,
    /// An EOF or `Error` item was produced: every further pull repeats it (`Lexer::last`).
    Done,
}

/// A pull lexer: the parser asks for one token at a time ([`Lexer::next_item`]), so there is no
/// token vector to fill, grow and free, and tokens borrow their text from the input. It works on
/// bytes (every delimiter, space and operator is ASCII; non-ASCII letters take a `char` path), and
/// reproduces Go's token boundaries, lines, trim handling and errors exactly.
pub(crate) struct Lexer<'a> {
    input: &'a str,
    bytes: &'a [u8],
    pos: usize,
    start: usize,
    /// Go's `atEOF`: once the end was read, `backup` does nothing.
    at_eof: bool,
    paren_depth: i64,
    line: usize,
    start_line: usize,
    state: State,
    /// The final EOF or `Error` item, repeated once lexing is done.
    last: Item,
    /// The message of the `Error` item, if lexing stopped at one.
    pub error: String,
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(input: &'a str) -> Lexer<'a> {
        Lexer {
            input,
            bytes: input.as_bytes(),
            pos: 0,
            start: 0,
            at_eof: false,
            paren_depth: 0,
            line: 1,
            start_line: 1,
            state: State::Text,
            last: Item::EOF,
            error: String::new(),
        }
    }

    /// The text of a token.
    pub(crate) fn val(&self, it: Item) -> &'a str {
        &self.input[it.pos()..it.end as usize]
    }

    /// Go's `item.String()`, used in "unexpected X in Y" messages.
    pub(crate) fn describe(&self, it: Item) -> String {
        let val = self.val(it);
        match it.typ {
            ItemType::Eof => "EOF".into(),
            ItemType::Error => "error".into(),
            t if t.is_keyword() => format!("<{val}>"),
            _ => {
                if val.chars().count() > 10 {
                    let s: String = val.chars().take(10).collect();
                    format!("{}...", crate::gofmt::quote(&s))
                } else {
                    crate::gofmt::quote(val)
                }
            }
        }
    }

    /// The next token; after EOF or an `Error` item, that item again.
    pub(crate) fn next_item(&mut self) -> Item {
        match self.state {
            State::InsideAction => self.inside_action(),
            State::Text => self.text(),
            State::LeftDelim => match self.left_delim() {
                Some(it) => it,
                None => self.text(),
            },
            State::Done => self.last,
        }
    }

    /// The item from `start` to `pos`; the next one starts here.
    fn item(&mut self, typ: ItemType) -> Item {
        let it = Item {
            typ,
            pos: self.start as u32,
            end: self.pos as u32,
            line: self.start_line as u32,
        };
        self.start = self.pos;
        self.start_line = self.line;
        it
    }

    fn ignore(&mut self) {
        self.line += count_newlines(&self.bytes[self.start..self.pos]);
        self.start = self.pos;
        self.start_line = self.line;
    }

    /// Ends lexing with `it` (EOF or an error item).
    fn finish(&mut self, it: Item) -> Item {
        self.state = State::Done;
        self.last = it;
        it
    }

    fn errorf(&mut self, msg: impl Into<String>) -> Item {
        self.error = msg.into();
        let it = Item {
            typ: ItemType::Error,
            pos: self.start as u32,
            end: self.start as u32,
            line: self.start_line as u32,
        };
        self.finish(it)
    }

    /// The byte at `pos`; at the end, remembers it as Go's `peek` does.
    fn peek_byte(&mut self) -> Option<u8> {
        let b = self.bytes.get(self.pos).copied();
        if b.is_none() {
            self.at_eof = true;
        }
        b
    }

    /// The character at `pos` without consuming it.
    fn peek_char(&mut self) -> Option<char> {
        match self.peek_byte()? {
            b if b < 0x80 => Some(b as char),
            _ => self.input[self.pos..].chars().next(),
        }
    }

    /// Consumes one character (the `char` path of character constants).
    fn next(&mut self) -> Option<char> {
        let c = self.peek_char()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    /// Skips a run of ASCII letters, digits and `_` byte by byte (the common case of identifiers
    /// and field names), then any non-ASCII letters and digits; returns the character after the
    /// word (not consumed).
    fn skip_alnum(&mut self) -> Option<char> {
        let b = self.bytes;
        let mut p = self.pos;
        while p < b.len() && WORD[usize::from(b[p])] {
            p += 1;
        }
        self.pos = p;
        match b.get(p) {
            Some(&c) if c < 0x80 => Some(c as char),
            _ => self.skip_alnum_chars(),
        }
    }

    /// The rare tail of [`Self::skip_alnum`]: words with non-ASCII letters or digits.
    #[cold]
    fn skip_alnum_chars(&mut self) -> Option<char> {
        loop {
            match self.peek_char() {
                Some(c) if is_alnum(c) => self.pos += c.len_utf8(),
                r => return r,
            }
        }
    }

    fn accept(&mut self, valid: &[u8]) -> bool {
        match self.peek_byte() {
            Some(b) if valid.contains(&b) => {
                self.pos += 1;
                true
            }
            _ => false,
        }
    }

    fn accept_run(&mut self, valid: &[u8]) {
        while self.accept(valid) {}
    }

    fn at_right_delim(&self) -> (bool, bool) {
        let rest = &self.bytes[self.pos..];
        if has_right_trim(rest) && rest[2..].starts_with(RIGHT) {
            return (true, true);
        }
        (rest.starts_with(RIGHT), false)
    }

    fn at_terminator(&mut self) -> bool {
        match self.peek_byte() {
            None => true,
            Some(b' ' | b'\t' | b'\r' | b'\n' | b'.' | b',' | b'|' | b':' | b')' | b'(') => true,
            Some(b'}') => self.bytes.get(self.pos + 1) == Some(&b'}'),
            _ => false,
        }
    }

    fn text(&mut self) -> Item {
        loop {
            let Some(x) = find_left_delim(&self.bytes[self.pos..]) else {
                self.pos = self.bytes.len();
                if self.pos > self.start {
                    self.line += count_newlines(&self.bytes[self.start..self.pos]);
                    // The EOF item follows on the next pull.
                    return self.item(ItemType::Text);
                }
                let eof = self.item(ItemType::Eof);
                return self.finish(eof);
            };
            self.pos += x;
            let mut trim = 0;
            if has_left_trim(&self.bytes[self.pos + LEFT.len()..]) {
                trim = trim_right_len(&self.bytes[self.start..self.pos]);
            }
            self.pos -= trim;
            let text = if self.pos > self.start {
                self.line += count_newlines(&self.bytes[self.start..self.pos]);
                Some(self.item(ItemType::Text))
            } else {
                None
            };
            self.pos += trim;
            self.ignore();
            if let Some(t) = text {
                self.state = State::LeftDelim;
                return t;
            }
            if let Some(it) = self.left_delim() {
                return it;
            }
            // A comment: more text follows.
        }
    }

    /// At `{{`: the left delimiter item, or `None` after a comment (lexing goes on with text), or
    /// an error item from the comment.
    fn left_delim(&mut self) -> Option<Item> {
        self.pos += LEFT.len();
        let trim = has_left_trim(&self.bytes[self.pos..]);
        let after = if trim { 2 } else { 0 };
        if self.bytes[self.pos + after..].starts_with(b"/*") {
            self.pos += after;
            self.ignore();
            self.state = State::Text;
            return self.comment();
        }
        let it = self.item(ItemType::LeftDelim);
        self.pos += after;
        self.ignore();
        self.paren_depth = 0;
        self.state = State::InsideAction;
        Some(it)
    }

    fn comment(&mut self) -> Option<Item> {
        self.pos += 2;
        let Some(i) = memchr::memmem::find(&self.bytes[self.pos..], b"*/") else {
            return Some(self.errorf("unclosed comment"));
        };
        self.pos += i + 2;
        let (delim, trim) = self.at_right_delim();
        if !delim {
            return Some(self.errorf("comment ends before closing delimiter"));
        }
        if trim {
            self.pos += 2;
        }
        self.pos += RIGHT.len();
        if trim {
            self.pos += trim_left_len(&self.bytes[self.pos..]);
        }
        self.ignore();
        None
    }

    fn right_delim(&mut self) -> Item {
        let trim = has_right_trim(&self.bytes[self.pos..]);
        if trim {
            self.pos += 2;
            self.ignore();
        }
        self.pos += RIGHT.len();
        let it = self.item(ItemType::RightDelim);
        if trim {
            self.pos += trim_left_len(&self.bytes[self.pos..]);
            self.ignore();
        }
        self.state = State::Text;
        it
    }

    fn inside_action(&mut self) -> Item {
        let (delim, _) = self.at_right_delim();
        if delim {
            if self.paren_depth == 0 {
                return self.right_delim();
            }
            return self.errorf("unclosed left paren");
        }
        let Some(b) = self.peek_byte() else {
            return self.errorf("unclosed action");
        };
        match b {
            b' ' | b'\t' | b'\r' | b'\n' => self.space(),
            b'=' => {
                self.pos += 1;
                self.item(ItemType::Assign)
            }
            b':' => {
                self.pos += 1;
                if self.peek_byte() != Some(b'=') {
                    return self.errorf("expected :=");
                }
                self.pos += 1;
                self.item(ItemType::Declare)
            }
            b'|' => {
                self.pos += 1;
                self.item(ItemType::Pipe)
            }
            b'"' => {
                self.pos += 1;
                self.quote()
            }
            b'`' => {
                self.pos += 1;
                self.raw_quote()
            }
            b'$' => {
                self.pos += 1;
                self.field_or_variable(ItemType::Variable)
            }
            b'\'' => {
                self.pos += 1;
                self.char_constant()
            }
            b'.' => {
                // Look ahead for ".field" (else '.' starts a number such as `.5`).
                if let Some(n) = self.bytes.get(self.pos + 1)
                    && !n.is_ascii_digit()
                {
                    self.pos += 1;
                    return self.field_or_variable(ItemType::Field);
                }
                self.number()
            }
            b'+' | b'-' | b'0'..=b'9' => self.number(),
            b if b.is_ascii_alphabetic() || b == b'_' => self.identifier(),
            b'(' => {
                self.pos += 1;
                self.paren_depth += 1;
                self.item(ItemType::LeftParen)
            }
            b')' => {
                self.pos += 1;
                let it = self.item(ItemType::RightParen);
                self.paren_depth -= 1;
                if self.paren_depth < 0 {
                    // Go 1.19 (the oracle) sends the paren, then the error.
                    self.errorf(format!("unexpected right paren {}", unicode_desc(')')));
                }
                it
            }
            b if b < 0x80 && !b.is_ascii_control() => {
                self.pos += 1;
                self.item(ItemType::Char)
            }
            b if b < 0x80 => {
                self.pos += 1;
                self.errorf(format!(
                    "unrecognized character in action: {}",
                    unicode_desc(b as char)
                ))
            }
            _ => {
                let c = self.peek_char().unwrap_or('\u{fffd}');
                if is_alnum(c) {
                    return self.identifier();
                }
                self.pos += c.len_utf8();
                self.errorf(format!("unrecognized character in action: {}", unicode_desc(c)))
            }
        }
    }

    fn space(&mut self) -> Item {
        let b = self.bytes;
        let from = self.pos;
        let mut p = from;
        let mut newlines = 0;
        while let Some(&c) = b.get(p) {
            if !is_space_byte(c) {
                break;
            }
            newlines += usize::from(c == b'\n');
            p += 1;
        }
        if p == b.len() {
            self.at_eof = true;
        }
        self.pos = p;
        self.line += newlines;
        // A trim-marked right delimiter (` -}}`) keeps its space.
        let last = p - 1;
        if has_right_trim(&b[last..]) && b[last + 2..].starts_with(RIGHT) {
            self.pos = last;
            if b[last] == b'\n' {
                self.line -= 1;
            }
            if p - from == 1 {
                return self.right_delim();
            }
        }
        self.item(ItemType::Space)
    }

    fn identifier(&mut self) -> Item {
        let r = self.skip_alnum();
        if !self.at_terminator() {
            return self.errorf(format!("bad character {}", unicode_desc_opt(r)));
        }
        let typ = keyword(&self.bytes[self.start..self.pos]);
        self.item(typ)
    }

    /// After `.` or `$`: a field or variable name, or `.`/`$` alone.
    fn field_or_variable(&mut self, typ: ItemType) -> Item {
        if self.at_terminator() {
            return self.item(if typ == ItemType::Variable {
                ItemType::Variable
            } else {
                ItemType::Dot
            });
        }
        let r = self.skip_alnum();
        if !self.at_terminator() {
            return self.errorf(format!("bad character {}", unicode_desc_opt(r)));
        }
        self.item(typ)
    }

    fn char_constant(&mut self) -> Item {
        loop {
            match self.next() {
                Some('\\') => match self.next() {
                    Some(c) if c != '\n' => {}
                    _ => return self.errorf("unterminated character constant"),
                },
                None | Some('\n') => return self.errorf("unterminated character constant"),
                Some('\'') => break,
                _ => {}
            }
        }
        self.item(ItemType::CharConstant)
    }

    /// A `"…"` string, byte by byte: the bytes of a multi-byte character are never `\`, `"` or
    /// a newline, so they need no decoding.
    fn quote(&mut self) -> Item {
        let b = self.bytes;
        let mut p = self.pos;
        loop {
            match b.get(p) {
                Some(b'\\') => match b.get(p + 1) {
                    Some(c) if *c != b'\n' => p += 2,
                    _ => return self.errorf("unterminated quoted string"),
                },
                None | Some(b'\n') => return self.errorf("unterminated quoted string"),
                Some(b'"') => break,
                _ => p += 1,
            }
        }
        self.pos = p + 1;
        self.item(ItemType::String)
    }

    fn raw_quote(&mut self) -> Item {
        let Some(i) = memchr::memchr(b'`', &self.bytes[self.pos..]) else {
            return self.errorf("unterminated raw quoted string");
        };
        self.line += count_newlines(&self.bytes[self.pos..self.pos + i]);
        self.pos += i + 1;
        self.item(ItemType::RawString)
    }

    fn number(&mut self) -> Item {
        if !self.scan_number() {
            let t = crate::gofmt::quote(&self.input[self.start..self.pos]);
            return self.errorf(format!("bad number syntax: {t}"));
        }
        if let Some(b'+' | b'-') = self.peek_byte() {
            if !self.scan_number() || !self.input[..self.pos].ends_with('i') {
                let t = crate::gofmt::quote(&self.input[self.start..self.pos]);
                return self.errorf(format!("bad number syntax: {t}"));
            }
            return self.item(ItemType::Complex);
        }
        self.item(ItemType::Number)
    }

    fn scan_number(&mut self) -> bool {
        self.accept(b"+-");
        let mut digits: &[u8] = b"0123456789_";
        if self.accept(b"0") {
            if self.accept(b"xX") {
                digits = b"0123456789abcdefABCDEF_";
            } else if self.accept(b"oO") {
                digits = b"01234567_";
            } else if self.accept(b"bB") {
                digits = b"01_";
            }
        }
        self.accept_run(digits);
        if self.accept(b".") {
            self.accept_run(digits);
        }
        if digits.len() == 11 && self.accept(b"eE") {
            self.accept(b"+-");
            self.accept_run(b"0123456789_");
        }
        if digits.len() == 23 && self.accept(b"pP") {
            self.accept(b"+-");
            self.accept_run(b"0123456789_");
        }
        self.accept(b"i");
        if let Some(c) = self.peek_char()
            && is_alnum(c)
        {
            self.pos += c.len_utf8();
            return false;
        }
        true
    }
}

/// Go's `%#U` of a rune: `U+0041 'A'`.
pub(crate) fn unicode_desc(c: char) -> String {
    let mut s = format!("U+{:04X}", c as u32);
    if crate::gofmt::is_print(c) {
        s.push_str(&format!(" '{c}'"));
    }
    s
}

fn unicode_desc_opt(c: Option<char>) -> String {
    match c {
        Some(c) => unicode_desc(c),
        None => "U+FFFFFFFFFFFFFFFF".into(),
    }
}

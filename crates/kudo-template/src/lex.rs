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

#[derive(Clone, Debug)]
pub(crate) struct Item<'a> {
    pub typ: ItemType,
    pub pos: usize,
    /// The token text, borrowed from the input. An `Error` item's message is [`Lexed::error`]
    /// (there is at most one: lexing stops there), so an item is small and never owns memory.
    pub val: &'a str,
    pub line: usize,
}

/// The tokens of a template; the list ends with EOF or an `Error` item, whose message is `error`.
pub(crate) struct Lexed<'a> {
    pub items: Vec<Item<'a>>,
    pub error: String,
}

impl Item<'_> {
    /// Go's `item.String()`, used in "unexpected X in Y" messages.
    pub fn describe(&self) -> String {
        match self.typ {
            ItemType::Eof => "EOF".into(),
            ItemType::Error => "error".into(),
            t if t.is_keyword() => format!("<{}>", self.val),
            _ => {
                if self.val.chars().count() > 10 {
                    let s: String = self.val.chars().take(10).collect();
                    format!("{}...", crate::gofmt::quote(&s))
                } else {
                    crate::gofmt::quote(self.val)
                }
            }
        }
    }
}

const LEFT: &str = "{{";
const RIGHT: &str = "}}";

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

/// Newlines in `s` (line numbers of error messages), counted with SIMD.
fn count_newlines(s: &str) -> usize {
    memchr::memchr_iter(b'\n', s.as_bytes()).count()
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn is_alnum(c: char) -> bool {
    if c.is_ascii() {
        return c == '_' || c.is_ascii_alphanumeric();
    }
    c.is_alphabetic() || c.is_numeric()
}

fn has_left_trim(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 2 && b[0] == b'-' && is_space(b[1] as char)
}

fn has_right_trim(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 2 && is_space(b[0] as char) && b[1] == b'-'
}

fn trim_right_len(s: &str) -> usize {
    s.len() - s.trim_end_matches(is_space).len()
}

fn trim_left_len(s: &str) -> usize {
    s.len() - s.trim_start_matches(is_space).len()
}

#[derive(Clone, Copy)]
enum State {
    Text,
    LeftDelim,
    Comment,
    RightDelim,
    InsideAction,
    Space,
    Identifier,
    Field,
    Variable,
    Char,
    Number,
    Quote,
    RawQuote,
}

struct Lexer<'a> {
    input: &'a str,
    pos: usize,
    start: usize,
    at_eof: bool,
    paren_depth: i64,
    line: usize,
    start_line: usize,
    items: Vec<Item<'a>>,
    error: String,
}

/// Tokenizes `input` completely (the item list ends with EOF or an error item).
pub(crate) fn lex(input: &str) -> Lexed<'_> {
    let mut l = Lexer {
        input,
        pos: 0,
        start: 0,
        at_eof: false,
        paren_depth: 0,
        line: 1,
        start_line: 1,
        items: Vec::with_capacity(input.len() / 4 + 8),
        error: String::new(),
    };
    let mut state = Some(State::Text);
    while let Some(s) = state {
        state = l.step(s);
    }
    Lexed {
        items: l.items,
        error: l.error,
    }
}

impl<'a> Lexer<'a> {
    /// Skips a run of ASCII letters, digits and `_` byte by byte (the common case of identifiers
    /// and field names); non-ASCII letters are left to the `char` loop that follows.
    fn skip_ascii_alnum(&mut self) {
        let rest = &self.input.as_bytes()[self.pos..];
        let n = rest
            .iter()
            .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
            .unwrap_or(rest.len());
        self.pos += n;
    }

    fn next(&mut self) -> Option<char> {
        if self.pos >= self.input.len() {
            self.at_eof = true;
            return None;
        }
        let b = self.input.as_bytes()[self.pos];
        if b < 0x80 {
            self.pos += 1;
            if b == b'\n' {
                self.line += 1;
            }
            return Some(b as char);
        }
        let c = self.input[self.pos..].chars().next()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    /// The next character without consuming it (decoded in place rather than `next` + `backup`).
    fn peek(&mut self) -> Option<char> {
        let Some(&b) = self.input.as_bytes().get(self.pos) else {
            // As Go's next + backup: reaching the end is remembered (later backups do nothing).
            self.at_eof = true;
            return None;
        };
        if b < 0x80 {
            return Some(b as char);
        }
        self.input[self.pos..].chars().next()
    }

    fn backup(&mut self) {
        if !self.at_eof && self.pos > 0 {
            let b = self.input.as_bytes()[self.pos - 1];
            if b < 0x80 {
                self.pos -= 1;
                if b == b'\n' {
                    self.line -= 1;
                }
                return;
            }
            if let Some(c) = self.input[..self.pos].chars().next_back() {
                self.pos -= c.len_utf8();
                if c == '\n' {
                    self.line -= 1;
                }
            }
        }
    }

    fn emit(&mut self, typ: ItemType) {
        self.items.push(Item {
            typ,
            pos: self.start,
            val: &self.input[self.start..self.pos],
            line: self.start_line,
        });
        self.start = self.pos;
        self.start_line = self.line;
    }

    fn ignore(&mut self) {
        self.line += count_newlines(&self.input[self.start..self.pos]);
        self.start = self.pos;
        self.start_line = self.line;
    }

    fn accept(&mut self, valid: &str) -> bool {
        match self.next() {
            Some(c) if valid.contains(c) => true,
            _ => {
                self.backup();
                false
            }
        }
    }

    fn accept_run(&mut self, valid: &str) {
        loop {
            match self.next() {
                Some(c) if valid.contains(c) => {}
                _ => break,
            }
        }
        self.backup();
    }

    fn errorf(&mut self, msg: String) -> Option<State> {
        self.items.push(Item {
            typ: ItemType::Error,
            pos: self.start,
            val: "",
            line: self.start_line,
        });
        self.error = msg;
        None
    }

    fn at_right_delim(&self) -> (bool, bool) {
        let rest = &self.input[self.pos..];
        if has_right_trim(rest) && rest[2..].starts_with(RIGHT) {
            return (true, true);
        }
        if rest.starts_with(RIGHT) {
            return (true, false);
        }
        (false, false)
    }

    fn at_terminator(&mut self) -> bool {
        match self.peek() {
            None => true,
            Some(c) if is_space(c) => true,
            Some('.' | ',' | '|' | ':' | ')' | '(') => true,
            _ => self.input[self.pos..].starts_with(RIGHT),
        }
    }

    fn step(&mut self, s: State) -> Option<State> {
        match s {
            State::Text => {
                if let Some(x) = find_left_delim(&self.input.as_bytes()[self.pos..]) {
                    self.pos += x;
                    let mut trim = 0;
                    if has_left_trim(&self.input[self.pos + LEFT.len()..]) {
                        trim = trim_right_len(&self.input[self.start..self.pos]);
                    }
                    self.pos -= trim;
                    if self.pos > self.start {
                        self.line += count_newlines(&self.input[self.start..self.pos]);
                        self.emit(ItemType::Text);
                    }
                    self.pos += trim;
                    self.ignore();
                    return Some(State::LeftDelim);
                }
                self.pos = self.input.len();
                if self.pos > self.start {
                    self.line += count_newlines(&self.input[self.start..self.pos]);
                    self.emit(ItemType::Text);
                }
                self.emit(ItemType::Eof);
                None
            }
            State::LeftDelim => {
                self.pos += LEFT.len();
                let trim = has_left_trim(&self.input[self.pos..]);
                let after = if trim { 2 } else { 0 };
                if self.input[self.pos + after..].starts_with("/*") {
                    self.pos += after;
                    self.ignore();
                    return Some(State::Comment);
                }
                self.emit(ItemType::LeftDelim);
                self.pos += after;
                self.ignore();
                self.paren_depth = 0;
                Some(State::InsideAction)
            }
            State::Comment => {
                self.pos += 2;
                let Some(i) = self.input[self.pos..].find("*/") else {
                    return self.errorf("unclosed comment".into());
                };
                self.pos += i + 2;
                let (delim, trim) = self.at_right_delim();
                if !delim {
                    return self.errorf("comment ends before closing delimiter".into());
                }
                if trim {
                    self.pos += 2;
                }
                self.pos += RIGHT.len();
                if trim {
                    self.pos += trim_left_len(&self.input[self.pos..]);
                }
                self.ignore();
                Some(State::Text)
            }
            State::RightDelim => {
                let trim = has_right_trim(&self.input[self.pos..]);
                if trim {
                    self.pos += 2;
                    self.ignore();
                }
                self.pos += RIGHT.len();
                self.emit(ItemType::RightDelim);
                if trim {
                    self.pos += trim_left_len(&self.input[self.pos..]);
                    self.ignore();
                }
                Some(State::Text)
            }
            State::InsideAction => {
                let (delim, _) = self.at_right_delim();
                if delim {
                    if self.paren_depth == 0 {
                        return Some(State::RightDelim);
                    }
                    return self.errorf("unclosed left paren".into());
                }
                let Some(r) = self.next() else {
                    return self.errorf("unclosed action".into());
                };
                match r {
                    c if is_space(c) => {
                        self.backup();
                        return Some(State::Space);
                    }
                    '=' => self.emit(ItemType::Assign),
                    ':' => {
                        if self.next() != Some('=') {
                            return self.errorf("expected :=".into());
                        }
                        self.emit(ItemType::Declare);
                    }
                    '|' => self.emit(ItemType::Pipe),
                    '"' => return Some(State::Quote),
                    '`' => return Some(State::RawQuote),
                    '$' => return Some(State::Variable),
                    '\'' => return Some(State::Char),
                    '.' => {
                        if self.pos < self.input.len() {
                            let b = self.input.as_bytes()[self.pos];
                            if !b.is_ascii_digit() {
                                return Some(State::Field);
                            }
                        }
                        self.backup();
                        return Some(State::Number);
                    }
                    '+' | '-' | '0'..='9' => {
                        self.backup();
                        return Some(State::Number);
                    }
                    c if is_alnum(c) => {
                        self.backup();
                        return Some(State::Identifier);
                    }
                    '(' => {
                        self.emit(ItemType::LeftParen);
                        self.paren_depth += 1;
                    }
                    ')' => {
                        self.emit(ItemType::RightParen);
                        self.paren_depth -= 1;
                        if self.paren_depth < 0 {
                            return self.errorf(format!("unexpected right paren {}", unicode_desc(r)));
                        }
                    }
                    c if (c as u32) < 0x80 && !c.is_ascii_control() => self.emit(ItemType::Char),
                    c => {
                        return self.errorf(format!("unrecognized character in action: {}", unicode_desc(c)));
                    }
                }
                Some(State::InsideAction)
            }
            State::Space => {
                let mut n = 0;
                while let Some(c) = self.peek() {
                    if !is_space(c) {
                        break;
                    }
                    self.next();
                    n += 1;
                }
                let from = self.pos - 1;
                if has_right_trim(&self.input[from..]) && self.input[from + 2..].starts_with(RIGHT) {
                    self.backup();
                    if n == 1 {
                        return Some(State::RightDelim);
                    }
                }
                self.emit(ItemType::Space);
                Some(State::InsideAction)
            }
            State::Identifier => {
                self.skip_ascii_alnum();
                loop {
                    match self.next() {
                        Some(c) if is_alnum(c) => {}
                        r => {
                            self.backup();
                            if !self.at_terminator() {
                                return self.errorf(format!("bad character {}", unicode_desc_opt(r)));
                            }
                            let word = &self.input[self.start..self.pos];
                            let typ = match word {
                                "block" => ItemType::Block,
                                "break" => ItemType::Break,
                                "continue" => ItemType::Continue,
                                "define" => ItemType::Define,
                                "else" => ItemType::Else,
                                "end" => ItemType::End,
                                "if" => ItemType::If,
                                "range" => ItemType::Range,
                                "nil" => ItemType::Nil,
                                "template" => ItemType::Template,
                                "with" => ItemType::With,
                                "." => ItemType::Dot,
                                "true" | "false" => ItemType::Bool,
                                w if w.starts_with('.') => ItemType::Field,
                                _ => ItemType::Identifier,
                            };
                            self.emit(typ);
                            break;
                        }
                    }
                }
                Some(State::InsideAction)
            }
            State::Field => self.field_or_variable(ItemType::Field),
            State::Variable => {
                if self.at_terminator() {
                    self.emit(ItemType::Variable);
                    return Some(State::InsideAction);
                }
                self.field_or_variable(ItemType::Variable)
            }
            State::Char => {
                loop {
                    match self.next() {
                        Some('\\') => match self.next() {
                            Some(c) if c != '\n' => {}
                            _ => return self.errorf("unterminated character constant".into()),
                        },
                        None | Some('\n') => return self.errorf("unterminated character constant".into()),
                        Some('\'') => break,
                        _ => {}
                    }
                }
                self.emit(ItemType::CharConstant);
                Some(State::InsideAction)
            }
            State::Number => {
                if !self.scan_number() {
                    let t = self.input[self.start..self.pos].to_string();
                    return self.errorf(format!("bad number syntax: {}", crate::gofmt::quote(&t)));
                }
                match self.peek() {
                    Some('+' | '-') => {
                        if !self.scan_number() || !self.input[..self.pos].ends_with('i') {
                            let t = self.input[self.start..self.pos].to_string();
                            return self.errorf(format!("bad number syntax: {}", crate::gofmt::quote(&t)));
                        }
                        self.emit(ItemType::Complex);
                    }
                    _ => self.emit(ItemType::Number),
                }
                Some(State::InsideAction)
            }
            State::Quote => {
                loop {
                    match self.next() {
                        Some('\\') => match self.next() {
                            Some(c) if c != '\n' => {}
                            _ => return self.errorf("unterminated quoted string".into()),
                        },
                        None | Some('\n') => return self.errorf("unterminated quoted string".into()),
                        Some('"') => break,
                        _ => {}
                    }
                }
                self.emit(ItemType::String);
                Some(State::InsideAction)
            }
            State::RawQuote => {
                loop {
                    match self.next() {
                        None => return self.errorf("unterminated raw quoted string".into()),
                        Some('`') => break,
                        _ => {}
                    }
                }
                self.emit(ItemType::RawString);
                Some(State::InsideAction)
            }
        }
    }

    fn field_or_variable(&mut self, typ: ItemType) -> Option<State> {
        if self.at_terminator() {
            self.emit(if typ == ItemType::Variable {
                ItemType::Variable
            } else {
                ItemType::Dot
            });
            return Some(State::InsideAction);
        }
        self.skip_ascii_alnum();
        let r = loop {
            let r = self.next();
            match r {
                Some(c) if is_alnum(c) => {}
                _ => {
                    self.backup();
                    break r;
                }
            }
        };
        if !self.at_terminator() {
            return self.errorf(format!("bad character {}", unicode_desc_opt(r)));
        }
        self.emit(typ);
        Some(State::InsideAction)
    }

    fn scan_number(&mut self) -> bool {
        self.accept("+-");
        let mut digits = "0123456789_";
        if self.accept("0") {
            if self.accept("xX") {
                digits = "0123456789abcdefABCDEF_";
            } else if self.accept("oO") {
                digits = "01234567_";
            } else if self.accept("bB") {
                digits = "01_";
            }
        }
        self.accept_run(digits);
        if self.accept(".") {
            self.accept_run(digits);
        }
        if digits.len() == 11 && self.accept("eE") {
            self.accept("+-");
            self.accept_run("0123456789_");
        }
        if digits.len() == 23 && self.accept("pP") {
            self.accept("+-");
            self.accept_run("0123456789_");
        }
        self.accept("i");
        if let Some(c) = self.peek()
            && is_alnum(c)
        {
            self.next();
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

//! Go's `strconv.Quote`, shared by every message that quotes a value the way Go prints it (the
//! template engine's errors, Go duration errors, KUDO's parameter messages, CEL rule messages).

/// Go's `strconv.Quote` (what `%q` prints for a string): printable runes kept, the rest escaped.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if is_go_printable(c) => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Approximation of Go's `unicode.IsPrint`: graphic characters plus ASCII space; controls,
/// non-ASCII spaces, format characters, private use and noncharacters are not printable.
pub fn is_go_printable(c: char) -> bool {
    let u = c as u32;
    if u < 0x20 || (0x7f..0xa0).contains(&u) {
        return false;
    }
    if c == ' ' {
        return true;
    }
    if c.is_whitespace() {
        return false;
    }
    matches!(u,
        0x00AD | 0x0600..=0x0605 | 0x061C | 0x06DD | 0x070F | 0x08E2 | 0x180E | 0x200B..=0x200F
        | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB
        | 0xE000..=0xF8FF | 0xF0000..=0x10FFFF | 0xFFFE | 0xFFFF | 0xFDD0..=0xFDEF
        | 0xE0001 | 0xE0020..=0xE007F | 0x110BD | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A)
    .then_some(false)
    .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::go_quote;

    #[test]
    fn quotes_as_go_strconv_quote() {
        // Expected strings are what Go's strconv.Quote returns for these inputs.
        let rows = [
            ("plain", r#""plain""#),
            ("a\"b\\c", r#""a\"b\\c""#),
            ("\u{7}\u{8}\u{c}\n\r\t\u{b}", r#""\a\b\f\n\r\t\v""#),
            ("\u{1}\u{7f}", r#""\x01\x7f""#),
            ("é ü 😀", r#""é ü 😀""#),
            ("\u{ad}\u{200b}\u{feff}", r#""\u00ad\u200b\ufeff""#),
            ("\u{e000}\u{10ffff}", r#""\ue000\U0010ffff""#),
            ("\u{a0}", r#""\u00a0""#),
        ];
        for (input, quoted) in rows {
            assert_eq!(go_quote(input), quoted, "{input:?}");
        }
    }
}

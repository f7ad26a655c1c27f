//! Splitting a line into words the way `iptables-restore` does, and quoting words the way
//! `iptables-save` does.
//!
//! `iptables-restore` (xtables' `add_param_to_argv`) splits on blanks; a double quote opens a
//! quoted part in which a backslash takes the next character literally and the closing quote
//! ends the word. Outside quotes a backslash is an ordinary character. We differ in two
//! harmless ways: an unterminated quote is an error (iptables lets it run to the end of the
//! line), and a carriage return is a blank (so that files with CRLF line ends read the same).

/// One word of a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Word<'a> {
    /// The word's value, quotes and escapes removed.
    pub text: String,
    /// The word as written (quotes included).
    pub raw: &'a str,
    /// Byte offset of the word in its line.
    pub start: usize,
    /// Whether any part of the word was quoted: a quoted word is never an option.
    pub quoted: bool,
}

impl Word<'_> {
    /// Whether the word is the unquoted text `s`.
    pub fn is(&self, s: &str) -> bool {
        !self.quoted && self.text == s
    }

    /// Whether the word looks like an option (`-x`, `--xyz`) and is not quoted.
    pub fn is_option(&self) -> bool {
        !self.quoted && self.text.len() > 1 && self.text.starts_with('-')
    }
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r')
}

/// The words of `line`, or the byte offset of an unterminated quote.
pub(crate) fn words<'a>(line: &'a str) -> Result<Vec<Word<'a>>, usize> {
    let mut out = Vec::new();
    let mut text = String::new();
    // Start offset of the word being read, if any; offset of an open quote, if any.
    let mut start: Option<usize> = None;
    let mut quote: Option<usize> = None;
    let mut quoted = false;
    let mut escaped = false;
    let finish = |out: &mut Vec<Word<'a>>, text: &mut String, start: usize, end: usize, q: bool| {
        out.push(Word {
            text: std::mem::take(text),
            raw: &line[start..end],
            start,
            quoted: q,
        });
    };
    for (i, c) in line.char_indices() {
        if quote.is_some() {
            if escaped {
                text.push(c);
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                // The closing quote ends the word (as in iptables).
                quote = None;
                let s = start.take().unwrap_or(i);
                finish(&mut out, &mut text, s, i + 1, true);
                quoted = false;
            } else {
                text.push(c);
            }
        } else if c == '"' {
            quote = Some(i);
            quoted = true;
            start.get_or_insert(i);
        } else if is_blank(c) {
            if let Some(s) = start.take() {
                finish(&mut out, &mut text, s, i, quoted);
                quoted = false;
            }
        } else {
            start.get_or_insert(i);
            text.push(c);
        }
    }
    if let Some(q) = quote {
        return Err(q);
    }
    if let Some(s) = start {
        finish(&mut out, &mut text, s, line.len(), quoted);
    }
    Ok(out)
}

/// `value` as `iptables-save` writes it (xtables' `xtables_save_string`): bare when it is a
/// non-empty run of letters, digits, `_` and `-`; otherwise in double quotes with `"`, `\` and
/// `'` escaped by a backslash.
pub(crate) fn quote(value: &str) -> String {
    let bare = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        return value.to_string();
    }
    let mut s = String::with_capacity(value.len() + 2);
    s.push('"');
    for c in value.chars() {
        if matches!(c, '"' | '\\' | '\'') {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(line: &str) -> Vec<String> {
        words(line).unwrap().into_iter().map(|w| w.text).collect()
    }

    #[test]
    fn splits_like_iptables_restore() {
        assert_eq!(
            texts("  -A  INPUT\t-j ACCEPT "),
            ["-A", "INPUT", "-j", "ACCEPT"]
        );
        assert_eq!(
            texts(r#"--comment "dns \"and\" ntp" -j X"#),
            ["--comment", r#"dns "and" ntp"#, "-j", "X"]
        );
        // A closing quote ends the word; an opening quote continues it.
        assert_eq!(texts(r#"ab"c d"ef"#), ["abc d", "ef"]);
        assert_eq!(texts(r#""" x"#), ["", "x"]);
        // Outside quotes a backslash is literal.
        assert_eq!(texts(r"a\b"), [r"a\b"]);
        assert_eq!(texts(r#""a\\b""#), [r"a\b"]);
        let w = words(r#"-m comment --comment "x y" -j"#).unwrap();
        assert_eq!(w[3].raw, r#""x y""#);
        assert_eq!(w[3].start, 21);
        assert!(w[3].quoted && !w[3].is_option());
        assert!(w[4].is("-j"));
        assert_eq!(words(r#"-j "abc"#), Err(3));
        assert_eq!(
            words("a\r"),
            Ok(vec![Word {
                text: "a".into(),
                raw: "a",
                start: 0,
                quoted: false
            }])
        );
    }

    #[test]
    fn quotes_like_iptables_save() {
        assert_eq!(quote("cb12"), "cb12");
        assert_eq!(quote("a-b_c"), "a-b_c");
        assert_eq!(quote(""), r#""""#);
        assert_eq!(quote("a b"), r#""a b""#);
        assert_eq!(
            quote(r#"say "hi" it's \ ok"#),
            r#""say \"hi\" it\'s \\ ok""#
        );
        for v in ["", "x", "a b", r#"q"q"#, r"\\", "it's", "tab\there", "ünï"] {
            let line = format!("-x {}", quote(v));
            assert_eq!(words(&line).unwrap()[1].text, v, "{line}");
        }
    }
}

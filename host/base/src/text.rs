//! Text that comes from a plugin (log lines, stderr, names) on its way to a
//! terminal or a log: control characters and bidirectional overrides are
//! escaped, so a plugin cannot forge host log lines or drive the terminal,
//! and the length is capped.

/// `text` with control and bidirectional-format characters escaped (`\n`,
/// `\u{1b}` …) and at most `max_chars` characters kept.
pub fn sanitize(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars));
    for (count, c) in text.chars().enumerate() {
        if count == max_chars {
            let rest = text.chars().count() - count;
            out.push_str(&format!("… ({rest} more characters)"));
            break;
        }
        if c.is_control() || is_bidi_format(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Characters that reorder how a terminal shows the text around them.
fn is_bidi_format(c: char) -> bool {
    matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_are_escaped() {
        assert_eq!(
            sanitize("ok\n2026-01-01 ERROR host: forged\r\u{1b}[2J\u{202E}x", 100),
            "ok\\n2026-01-01 ERROR host: forged\\r\\u{1b}[2J\\u{202e}x"
        );
        assert_eq!(sanitize("plain text, ünïcode", 100), "plain text, ünïcode");
    }

    #[test]
    fn long_text_is_cut_and_says_so() {
        let long = "x".repeat(1_000_000);
        let short = sanitize(&long, 10);
        assert_eq!(short, "xxxxxxxxxx… (999990 more characters)");
    }
}

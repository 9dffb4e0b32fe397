//! Keyword assignments that hold a credential (`evaluators/known_secrets.py`
//! `keyword_secret`), on ASCII text: `"key": "value"`, `KEY=value`, `key := 'value'`... whose
//! key names a secret and whose value looks like one.
//!
//! `assignment` walks the text as Python's `re` runs `ASSIGNMENT` (leftmost start, the
//! alternatives in their order, greedy and lazy repeats), written out by hand because the
//! pattern needs look-behind and a conditional group: the native form carries the pattern's
//! text, and a pack whose pattern is not the one this walk was written for is refused.

use regex::Regex;

use crate::rules_pack::Refused;

/// The `ASSIGNMENT` pattern the walk below reads as `re` does.
pub const ASSIGNMENT: &str = "(?x)\n    (?:(?<=\\\\[nrt])|(?<![\\w.\\\\-]))(?P<key>[^\\W\\d][\\w.-]*)  # after `\\n` in escaped text too\n    [\\\\\"'\\]]{0,3}\\s*(?::=|=>|[:=])\\s*\n    (?:\n        (?P<escaped>\\\\)?\"(?P<dq>(?:[^\"\\\\\\n]|\\\\.)*?)(?(escaped)\\\\)\"\n      | '(?P<sq>[^'\\n]*)'\n      | `(?P<bq>[^`\\n]*)`\n      | (?P<bare>[^\\s\"'`,;}\\\\]+)\n    )\n    ";

/// `re`'s `\s` on ASCII text (Unicode whitespace: the separators 0x1c-0x1f too).
fn space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0x1c..=0x1f)
}

fn word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// One assignment: where its key ends, and its value (bare or quoted).
struct Assignment {
    key: (usize, usize),
    value: (usize, usize),
    bare: bool,
}

/// The value alternatives at `v` (escaped or plain double quotes, single quotes, backticks,
/// bare), the first that matches.
fn value_at(t: &[u8], v: usize) -> Option<((usize, usize), bool)> {
    let at = |i: usize| t.get(i).copied();
    // (\\)?"(?P<dq>(?:[^"\\\n]|\\.)*?)(?(escaped)\\)"
    let dq = |open: usize, escaped: bool| -> Option<(usize, usize)> {
        let mut e = open;
        loop {
            let closes = if escaped {
                at(e) == Some(b'\\') && at(e + 1) == Some(b'"')
            } else {
                at(e) == Some(b'"')
            };
            if closes {
                return Some((open, e));
            }
            match at(e)? {
                b'"' | b'\n' => return None,
                b'\\' => match at(e + 1) {
                    Some(b'\n') | None => return None,
                    Some(_) => e += 2,
                },
                _ => e += 1,
            }
        }
    };
    if at(v) == Some(b'\\') && at(v + 1) == Some(b'"') {
        if let Some(span) = dq(v + 2, true) {
            return Some((span, false));
        }
    }
    if at(v) == Some(b'"') {
        if let Some(span) = dq(v + 1, false) {
            return Some((span, false));
        }
    }
    for quote in [b'\'', b'`'] {
        if at(v) == Some(quote) {
            let end = (v + 1..t.len()).find(|&i| t[i] == quote || t[i] == b'\n');
            if let Some(e) = end.filter(|&e| t[e] == quote) {
                return Some(((v + 1, e), false));
            }
        }
    }
    let end = (v..t.len())
        .find(|&i| space(t[i]) || b"\"'`,;}\\".contains(&t[i]))
        .unwrap_or(t.len());
    (end > v).then_some(((v, end), true))
}

/// `ASSIGNMENT.search(text, pos)`.
fn assignment(t: &[u8], pos: usize) -> Option<Assignment> {
    for start in pos..t.len() {
        let after_escape = start >= 2 && t[start - 2] == b'\\' && b"nrt".contains(&t[start - 1]);
        let free = start == 0 || !(word(t[start - 1]) || b".\\-".contains(&t[start - 1]));
        if !(after_escape || free) || !(t[start].is_ascii_alphabetic() || t[start] == b'_') {
            continue;
        }
        // The key is the whole run: a shorter one is followed by a key character, which
        // nothing after the key may start with.
        let mut k = start + 1;
        while k < t.len() && (word(t[k]) || t[k] == b'.' || t[k] == b'-') {
            k += 1;
        }
        let mut i = k;
        let mut quotes = 0;
        while quotes < 3 && i < t.len() && b"\\\"']".contains(&t[i]) {
            i += 1;
            quotes += 1;
        }
        while i < t.len() && space(t[i]) {
            i += 1;
        }
        let two = t.get(i..i + 2);
        let mut ops: Vec<usize> = Vec::new(); // operator lengths, in the order tried
        if two == Some(b":=") || two == Some(b"=>") {
            ops.push(2);
        }
        if i < t.len() && (t[i] == b':' || t[i] == b'=') {
            ops.push(1);
        }
        for op in ops {
            let mut v = i + op;
            while v < t.len() && space(t[v]) {
                v += 1;
            }
            if let Some((value, bare)) = value_at(t, v) {
                return Some(Assignment {
                    key: (start, k),
                    value,
                    bare,
                });
            }
        }
    }
    None
}

/// What makes a value a credential and a key a secret's name (the constants of
/// `known_secrets`, handed over in the native form).
#[derive(Debug)]
pub struct Keywords {
    /// The index of the keyword net in the rule's set.
    pub index: usize,
    pub secret_key: Regex,
    pub placeholders: Vec<String>,
    pub placeholder_parts: Vec<String>,
    pub min_chars: usize,
    pub min_entropy: f64,
    uuid: Regex,
}

impl Keywords {
    pub fn new(
        index: usize,
        assignment_pattern: &str,
        secret_key: &str,
        placeholders: Vec<String>,
        placeholder_parts: Vec<String>,
        min_chars: usize,
        min_entropy: f64,
    ) -> Result<Self, Refused> {
        if assignment_pattern != ASSIGNMENT {
            return Err(Refused(
                "the keyword assignment pattern is not the one read natively".into(),
            ));
        }
        let secret_key =
            Regex::new(secret_key).map_err(|e| Refused(format!("the secret key pattern: {e}")))?;
        let uuid = Regex::new(r"(?i)[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}")
            .map_err(|e| Refused(e.to_string()))?;
        Ok(Keywords {
            index,
            secret_key,
            placeholders,
            placeholder_parts,
            min_chars,
            min_entropy,
            uuid,
        })
    }

    /// `secret_key`: the key, split at case changes and separators, ends with a secret's name.
    fn secret_key(&self, key: &[u8]) -> bool {
        let mut split = String::with_capacity(key.len() + 4);
        for (i, &c) in key.iter().enumerate() {
            let prev = i.checked_sub(1).map(|j| key[j]);
            let next = key.get(i + 1).copied();
            let camel = c.is_ascii_uppercase()
                && prev.is_some_and(|p| {
                    p.is_ascii_lowercase()
                        || p.is_ascii_digit()
                        || (p.is_ascii_uppercase() && next.is_some_and(|n| n.is_ascii_lowercase()))
                });
            if camel {
                split.push('_');
            }
            split.push(c.to_ascii_lowercase() as char);
        }
        // `[\W_]+` -> `_`, then `_` stripped from both ends
        let mut words = String::with_capacity(split.len());
        let mut in_run = false;
        for c in split.chars() {
            if c.is_ascii_alphanumeric() {
                words.push(c);
                in_run = false;
            } else if !in_run {
                words.push('_');
                in_run = true;
            }
        }
        self.secret_key.is_match(words.trim_matches('_'))
    }

    /// `credential`: long enough, varied enough, not a placeholder, reference, path or URL.
    fn credential(&self, value: &str, bare: bool) -> bool {
        let lower = value.to_ascii_lowercase();
        if value.len() < self.min_chars
            || value.bytes().any(space)
            || self.placeholders.contains(&lower)
            || self
                .placeholder_parts
                .iter()
                .any(|p| lower.contains(p.as_str()))
            || ["/", "./", "~/"].iter().any(|p| value.starts_with(p))
            || value.contains("://")
            || (bare && value.contains(['(', '[']))
            || entropy(value) < self.min_entropy
        {
            return false;
        }
        let b = value.as_bytes();
        let (first, last) = (b.first().copied(), b.last().copied());
        // detect-secrets takes a one-character value (its IndexError) as templated
        let templated = b.is_empty()
            || (b.len() > 1 && first == Some(b'{') && last == Some(b'}'))
            || (b.len() > 1 && first == Some(b'<') && last == Some(b'>'))
            || (first == Some(b'$') && b.get(1).is_none_or(|c| *c == b'{') && last == Some(b'}'));
        !(templated
            || first == Some(b'$')
            || sequential(value)
            || self.uuid.is_match(value)
            || !b.iter().any(u8::is_ascii_alphabetic))
    }

    /// `keyword_secret` on ASCII text.
    pub fn keyword_secret(&self, text: &str) -> bool {
        let t = text.as_bytes();
        let mut pos = 0;
        while let Some(m) = assignment(t, pos) {
            if self.secret_key(&t[m.key.0..m.key.1])
                && self.credential(&text[m.value.0..m.value.1], m.bare)
            {
                return true;
            }
            pos = m.key.1;
        }
        false
    }
}

/// Shannon entropy in bits per character, summed in first-occurrence order as `Counter`.
fn entropy(value: &str) -> f64 {
    let mut counts: Vec<(u8, usize)> = Vec::new();
    for b in value.bytes() {
        match counts.iter_mut().find(|(c, _)| *c == b) {
            Some((_, n)) => *n += 1,
            None => counts.push((b, 1)),
        }
    }
    let n = value.len() as f64;
    let sum = counts.iter().fold(0.0, |acc, &(_, c)| {
        let p = c as f64 / n;
        acc + p * p.log2()
    });
    -sum
}

/// detect-secrets' `is_sequential_string`: the value, upper-cased, inside a run of the
/// alphabet, digits, hex or base64 letters.
fn sequential(value: &str) -> bool {
    const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    const DIGITS: &str = "0123456789";
    const HEX: &str = "0123456789ABCDEFABCDEF";
    let upper = value.to_ascii_uppercase();
    let sequences = [
        format!("{UPPER}{UPPER}{DIGITS}+/"),
        format!("{DIGITS}{UPPER}{UPPER}+/"),
        format!("{DIGITS}{UPPER}").repeat(2),
        DIGITS.repeat(2),
        HEX.repeat(2),
        format!("{UPPER}=/"),
    ];
    sequences.iter().any(|s| s.contains(&upper))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keywords() -> Keywords {
        Keywords::new(
            0,
            ASSIGNMENT,
            r"(?:password|passwd|passphrase|(?:^|_)(?:pwd|secret|secret_?key|api_?key|(?:access|auth)_?token))$",
            vec!["password".into(), "changeme".into()],
            vec!["xxxx".into(), "your_".into()],
            8,
            2.5,
        )
        .unwrap()
    }

    #[test]
    fn assignments_read_as_re_reads_them() {
        let k = keywords();
        assert!(k.keyword_secret(r#"{"password": "Zx9vQ2mLp7Hk"}"#));
        assert!(k.keyword_secret("DB_PASSWORD=Zx9vQ2mLp7Hk"));
        assert!(k.keyword_secret(r#"{\"clientSecret\": \"Zx9vQ2mLp7Hk\"}"#));
        assert!(k.keyword_secret(r#"x = "{\"accessToken\": \"Zx9vQ2mLp7Hk\"}""#));
        assert!(!k.keyword_secret(r#"{"payment_token": "tok_test_5521"}"#));
        assert!(!k.keyword_secret(r#"{"password": "changeme"}"#));
        assert!(!k.keyword_secret(r#"{"password": "${DB_PASSWORD}"}"#));
        assert!(!k.keyword_secret("password := "));
    }

    #[test]
    fn sequences_and_entropy_are_detect_secrets() {
        assert!(sequential("abcdefgh"));
        assert!(sequential("12345678"));
        assert!(!sequential("Zx9vQ2mL"));
        assert!((entropy("aaaabbbb") - 1.0).abs() < 1e-12);
    }
}

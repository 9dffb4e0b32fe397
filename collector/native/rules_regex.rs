//! RE2 patterns (what the secrets rules' detector set is written in, `evaluators/secrets.py`)
//! read by the `regex` crate with RE2's meaning on ASCII text.
//!
//! Both are linear-time engines with the same syntax for what these patterns use; on ASCII
//! text `\d`, `\w`, `\b`, `.` and case folding agree. Two things differ and are rewritten:
//! RE2's `\s` is `[\t\n\f\r ]` (the crate's includes `\v`), and RE2 has no nested classes (a
//! `[` inside a class is a literal `[`, where the crate opens a nested class). What the crate
//! does not read as RE2 does (`\C`, `\Q...\E`, `{,n}`) is refused.

use regex::{RegexSet, RegexSetBuilder};

use crate::rules_pack::Refused;

const SPACE: &str = r"\t\n\x0C\r ";

/// The pattern rewritten for the crate, or why it cannot be.
pub fn from_re2(pattern: &str) -> Result<String, Refused> {
    let refuse = |why: &str| Refused(format!("pattern {pattern:?}: {why}"));
    if pattern.contains("{,") {
        return Err(refuse(
            "`{,n}` is read differently by RE2 and the regex crate",
        ));
    }
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut i = 0;
    let mut in_class = false;
    let mut class_start = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            let Some(&next) = chars.get(i + 1) else {
                return Err(refuse("ends with a backslash"));
            };
            match next {
                'C' | 'Q' | 'E' => return Err(refuse("`\\C` and `\\Q...\\E` are RE2's alone")),
                's' if in_class => out.push_str(SPACE),
                'S' if in_class => out.push_str(&format!("[^{SPACE}]")),
                's' => out.push_str(&format!("[{SPACE}]")),
                'S' => out.push_str(&format!("[^{SPACE}]")),
                _ => {
                    out.push('\\');
                    out.push(next);
                }
            }
            i += 2;
            continue;
        }
        if in_class {
            match c {
                // `]` right after `[` or `[^` is a member, as in RE2.
                ']' if i > class_start => in_class = false,
                '[' if chars.get(i + 1) == Some(&':') => {
                    // a POSIX class, `[:alpha:]`, read alike
                    let end = (i + 2..chars.len().saturating_sub(1))
                        .find(|&j| chars[j] == ':' && chars[j + 1] == ']')
                        .ok_or_else(|| refuse("unclosed POSIX class"))?;
                    out.extend(&chars[i..end + 2]);
                    i = end + 2;
                    continue;
                }
                '[' => {
                    out.push_str("\\[");
                    i += 1;
                    continue;
                }
                '-' if chars.get(i + 1) == Some(&'-') => {
                    return Err(refuse(
                        "`--` in a class is a set difference to the regex crate",
                    ));
                }
                '&' | '~' if chars.get(i + 1) == Some(&c) => {
                    // `&&` and `~~` are the crate's class operators
                    out.push('\\');
                }
                _ => {}
            }
            out.push(c);
            i += 1;
            continue;
        }
        if c == '[' {
            in_class = true;
            out.push(c);
            i += 1;
            if chars.get(i) == Some(&'^') {
                out.push('^');
                i += 1;
            }
            class_start = i;
            continue;
        }
        out.push(c);
        i += 1;
    }
    Ok(out)
}

/// The RE2 patterns as one set.
pub fn set_of(patterns: &[String]) -> Result<RegexSet, Refused> {
    let rewritten = patterns
        .iter()
        .map(|p| from_re2(p))
        .collect::<Result<Vec<_>, _>>()?;
    RegexSetBuilder::new(&rewritten)
        .size_limit(1 << 26)
        .dfa_size_limit(1 << 24)
        .build()
        .map_err(|e| Refused(format!("the regex crate refuses a pattern: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_brackets_are_literal_as_in_re2() {
        let p = from_re2(r"[^a[\s]]+@").unwrap();
        assert_eq!(p, r"[^a\[\t\n\x0C\r ]]+@");
        let set = set_of(&[r"[^a[\s]]+@".to_owned()]).unwrap();
        assert!(set.is_match("b]@"));
        assert!(!set.is_match("b@"));
    }

    #[test]
    fn re2_spaces_leave_out_vertical_tab() {
        let set = set_of(&[r"a\sb".to_owned(), r"c\Sd".to_owned()]).unwrap();
        assert!(!set.is_match("a\x0bb"));
        assert!(set.is_match("c\x0bd"));
        assert!(set.is_match("a\tb"));
    }

    #[test]
    fn what_re2_alone_reads_is_refused() {
        assert!(from_re2(r"\Qa.b\E").is_err());
        assert!(from_re2(r"a{,3}").is_err());
        assert!(from_re2(r"[[:alpha:]]x").is_ok());
    }
}

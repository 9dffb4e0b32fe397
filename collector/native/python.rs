//! The Python built-ins the decoder's acceptance, messages and text columns depend on: `repr` of
//! a JSON value, `repr(float)` (and orjson's spelling of a float), `int(str)`, `float(str)`,
//! `bytes.fromhex` and strict `base64.b64decode`, each as CPython 3.11 behaves, so a request is
//! accepted or refused, told so, and its columns written exactly as by the Python decoder.

use std::fmt::Write;

use serde_json::Value;

use crate::unicode::{DECIMAL_ZEROS, NON_PRINTABLE};

/// `repr()` of the Python object orjson makes of a JSON value.
pub fn repr(value: &Value) -> String {
    let mut out = String::new();
    write_repr(value, &mut out);
    out
}

fn write_repr(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                let _ = write!(out, "{i}");
            } else if let Some(u) = n.as_u64() {
                let _ = write!(out, "{u}");
            } else {
                write_float(n.as_f64().unwrap_or(f64::NAN), FloatStyle::Python, out);
            }
        }
        Value::String(s) => write_str_repr(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str_repr(key, out);
                out.push_str(": ");
                write_repr(item, out);
            }
            out.push('}');
        }
    }
}

/// How a float is spelled: the two differ only in where the exponent form starts and in its
/// zero padding.
#[derive(Clone, Copy, PartialEq)]
pub enum FloatStyle {
    /// `repr(float)`: fixed from 1e-4 to below 1e16, else `1e+16`, `1.5e-05`.
    Python,
    /// `orjson.dumps(float)`: fixed from 1e-5 to below 1e16, else `1e+16`, `1.5e-7`.
    Orjson,
}

/// The shortest decimal digits that read back as `x` (positive, finite) and the decimal exponent
/// of the first: `x ≈ d.ddd × 10^exponent`. Rust's `{:e}` finds them, but where two candidates
/// are exactly as near it takes the upper one (616542274417506.25 gives ...506.3) and Python's
/// repr and orjson take the even one (...506.2).
fn shortest_digits(x: f64) -> (String, i32) {
    let sci = format!("{x:e}");
    let (mantissa, exponent) = sci.split_once('e').expect("`{:e}` writes an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` writes an integer exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    even_of_tie(x, &digits, exponent).unwrap_or((digits, exponent))
}

/// When `x` lies exactly halfway between two candidates with as many digits as `digits`, the
/// even one, if it reads back as `x`.
fn even_of_tie(x: f64, digits: &str, exponent: i32) -> Option<(String, i32)> {
    let exact = exact_short_decimal(x)?;
    if exact % 10 != 5 || exact.to_string().len() != digits.len() + 1 {
        return None;
    }
    let low = exact / 10;
    let even = if low % 2 == 0 { low } else { low + 1 };
    let mut candidate = even.to_string();
    let mut exponent = exponent;
    if candidate.len() > digits.len() {
        exponent += 1; // 99 + 1 carried into a new leading digit
    }
    candidate.truncate(candidate.trim_end_matches('0').len());
    if candidate == digits {
        return None;
    }
    let scale = exponent - (candidate.len() as i32 - 1);
    let reads_back = format!("{candidate}e{scale}").parse::<f64>() == Ok(x);
    reads_back.then_some((candidate, exponent))
}

/// The significant digits of `x`'s exact decimal value (`x` positive and finite), as an integer
/// without trailing zeros, when there are at most 19 of them: only such a value can lie exactly
/// halfway between two shortest (at most 17-digit) candidates.
fn exact_short_decimal(x: f64) -> Option<u128> {
    const LIMIT: u128 = 10_000_000_000_000_000_000; // 10**19
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    let (mut mantissa, mut power) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1 << 52), biased - 1075)
    };
    if mantissa == 0 {
        return None;
    }
    let zeros = mantissa.trailing_zeros();
    mantissa >>= zeros;
    power += zeros as i32;
    let digits = if power < 0 {
        // mantissa / 2^j = mantissa * 5^j / 10^j: the digits are mantissa * 5^j, ending in 5.
        let fives = 5u128.checked_pow(power.unsigned_abs())?;
        u128::from(mantissa).checked_mul(fives)?
    } else {
        // mantissa * 2^k: each factor 5 of the mantissa pairs with a 2 into a trailing zero.
        let mut odd = u128::from(mantissa);
        let mut twos = power.unsigned_abs();
        while twos > 0 && odd % 5 == 0 {
            odd /= 5;
            twos -= 1;
        }
        odd.checked_mul(1u128.checked_shl(twos)?)?
    };
    (digits < LIMIT).then_some(digits)
}

#[cfg(test)]
fn float_repr(x: f64) -> String {
    let mut out = String::new();
    write_float(x, FloatStyle::Python, &mut out);
    out
}

/// `x` spelled as `repr(float)` or `orjson.dumps` spell it: the shortest digits that read back
/// as the same float.
pub fn write_float(x: f64, style: FloatStyle, out: &mut String) {
    // Not reached from decoded values (NaN and infinities are null there); for completeness.
    if !x.is_finite() {
        out.push_str(match style {
            FloatStyle::Orjson => "null",
            FloatStyle::Python if x.is_nan() => "nan",
            FloatStyle::Python if x > 0.0 => "inf",
            FloatStyle::Python => "-inf",
        });
        return;
    }
    if x.is_sign_negative() {
        out.push('-');
    }
    let x = x.abs();
    if x == 0.0 {
        out.push_str("0.0");
        return;
    }
    let (digits, exponent) = shortest_digits(x);
    let lowest_fixed = if style == FloatStyle::Python { -4 } else { -5 };
    if (lowest_fixed..16).contains(&exponent) {
        if exponent < 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exponent - 1) as usize));
            out.push_str(&digits);
        } else {
            let whole = exponent as usize + 1;
            if digits.len() > whole {
                out.push_str(&digits[..whole]);
                out.push('.');
                out.push_str(&digits[whole..]);
            } else {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', whole - digits.len()));
                out.push_str(".0");
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let sign = if exponent < 0 { '-' } else { '+' };
        let _ = match style {
            FloatStyle::Python => write!(out, "e{sign}{:02}", exponent.abs()),
            FloatStyle::Orjson => write!(out, "e{sign}{}", exponent.abs()),
        };
    }
}

#[cfg(test)]
fn str_repr(s: &str) -> String {
    let mut out = String::new();
    write_str_repr(s, &mut out);
    out
}

/// `repr(str)`: single quotes unless only single quotes are inside, and escapes for the quote,
/// backslash, \t \n \r and every character `str.isprintable()` refuses.
fn write_str_repr(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        let code = c as u32;
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            _ if c == quote => {
                out.push('\\');
                out.push(c);
            }
            _ if code < 0x20 || code == 0x7f => {
                let _ = write!(out, "\\x{code:02x}");
            }
            _ if code < 0x80 || is_printable(code) => out.push(c),
            _ if code <= 0xff => {
                let _ = write!(out, "\\x{code:02x}");
            }
            _ if code <= 0xffff => {
                let _ = write!(out, "\\u{code:04x}");
            }
            _ => {
                let _ = write!(out, "\\U{code:08x}");
            }
        }
    }
    out.push(quote);
}

/// `str.isprintable()` of one non-ASCII character.
fn is_printable(code: u32) -> bool {
    NON_PRINTABLE
        .binary_search_by(|&(low, high)| {
            if high < code {
                std::cmp::Ordering::Less
            } else if low > code {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_err()
}

/// The value of a non-ASCII decimal digit (Unicode category Nd), as `int()` reads it.
fn decimal_digit(code: u32) -> Option<u8> {
    let i = DECIMAL_ZEROS.partition_point(|&zero| zero <= code);
    let zero = *DECIMAL_ZEROS.get(i.checked_sub(1)?)?;
    let digit = code - zero;
    (digit < 10).then_some(digit as u8)
}

/// The ASCII whitespace CPython's number parsers skip (`Py_ISSPACE`).
fn is_ascii_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// The non-ASCII characters `str.isspace()` is true for.
fn is_unicode_space(c: char) -> bool {
    matches!(
        c,
        '\u{85}' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    )
}

/// What `int()` and `float()` parse instead of the string: ASCII is kept, any other whitespace
/// becomes a space and any other decimal digit its ASCII digit; anything else (DEL included)
/// makes the string unreadable, as CPython's `_PyUnicode_TransformDecimalAndSpaceToASCII` does.
fn to_ascii_number(s: &str) -> Option<std::borrow::Cow<'_, [u8]>> {
    if s.bytes().all(|b| b < 0x7f) {
        return Some(std::borrow::Cow::Borrowed(s.as_bytes()));
    }
    let mut out = Vec::with_capacity(s.len());
    for c in s.chars() {
        let code = c as u32;
        if code < 0x7f {
            out.push(code as u8);
        } else if is_unicode_space(c) {
            out.push(b' ');
        } else {
            out.push(b'0' + decimal_digit(code)?);
        }
    }
    Some(std::borrow::Cow::Owned(out))
}

/// CPython refuses to convert longer decimal strings (`sys.int_info.default_max_str_digits`).
const MAX_STR_DIGITS: usize = 4300;

/// An integer `int(str)` read: small enough to compare with any field's range, or its decimal
/// form (always out of every range).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PyInt {
    Small(i128),
    Big(String),
}

/// `text` without the whitespace Python's `int()` and `float()` strip around a number.
fn trim_ascii_space(text: &[u8]) -> &[u8] {
    let start = text
        .iter()
        .position(|&b| !is_ascii_space(b))
        .unwrap_or(text.len());
    let end = text
        .iter()
        .rposition(|&b| !is_ascii_space(b))
        .map_or(start, |i| i + 1);
    &text[start..end]
}

/// `int(s)`: surrounding whitespace, one sign, decimal digits with single underscores between
/// them, at most 4300 digits. None where Python raises ValueError.
pub fn parse_int(s: &str) -> Option<PyInt> {
    let bytes = to_ascii_number(s)?;
    let rest = trim_ascii_space(&bytes);
    let negative = match rest.first() {
        Some(b'-') => true,
        Some(b'+') => false,
        _ => {
            return digits_value(rest, false);
        }
    };
    digits_value(&rest[1..], negative)
}

fn digits_value(text: &[u8], negative: bool) -> Option<PyInt> {
    if !text.first()?.is_ascii_digit() {
        return None;
    }
    let mut digits = Vec::with_capacity(text.len());
    let mut previous = b'0';
    for &b in text {
        if b == b'_' {
            if previous == b'_' {
                return None;
            }
        } else if b.is_ascii_digit() {
            digits.push(b);
        } else {
            return None;
        }
        previous = b;
    }
    if previous == b'_' || digits.len() > MAX_STR_DIGITS {
        return None;
    }
    let significant = match digits.iter().position(|&d| d != b'0') {
        Some(start) => &digits[start..],
        None => return Some(PyInt::Small(0)),
    };
    if significant.len() <= 38 {
        let magnitude = significant
            .iter()
            .fold(0i128, |acc, &d| acc * 10 + i128::from(d - b'0'));
        return Some(PyInt::Small(if negative { -magnitude } else { magnitude }));
    }
    let mut text = String::with_capacity(significant.len() + 1);
    if negative {
        text.push('-');
    }
    text.extend(significant.iter().map(|&d| d as char));
    Some(PyInt::Big(text))
}

/// `float(s)`: surrounding whitespace, a sign, decimal digits (underscores between them), an
/// optional fraction and exponent, or inf / infinity / nan in any case. None where Python raises
/// ValueError. Out-of-range magnitudes become ±inf or ±0, as in Python.
pub fn parse_float(s: &str) -> Option<f64> {
    let bytes = to_ascii_number(s)?;
    let mut text: Vec<u8>;
    let mut rest: &[u8] = &bytes;
    if rest.contains(&b'_') {
        // An underscore must sit between two digits (CPython checks before stripping spaces).
        text = Vec::with_capacity(rest.len());
        let mut previous = 0u8;
        for (i, &b) in rest.iter().enumerate() {
            if b == b'_' {
                let next = rest.get(i + 1).copied().unwrap_or(0);
                if !previous.is_ascii_digit() || !next.is_ascii_digit() {
                    return None;
                }
            } else {
                text.push(b);
            }
            previous = b;
        }
        rest = &text;
    }
    let rest = trim_ascii_space(rest);
    let (negative, unsigned) = match rest.first() {
        Some(b'-') => (true, &rest[1..]),
        Some(b'+') => (false, &rest[1..]),
        _ => (false, rest),
    };
    let word = std::str::from_utf8(unsigned).ok()?;
    let magnitude = if word.eq_ignore_ascii_case("inf") || word.eq_ignore_ascii_case("infinity") {
        f64::INFINITY
    } else if word.eq_ignore_ascii_case("nan") {
        f64::NAN
    } else if is_decimal_literal(unsigned) {
        word.parse::<f64>().ok()?
    } else {
        return None;
    };
    // Python keeps the sign of a NaN too (float('-nan') has its sign bit set).
    Some(if negative { -magnitude } else { magnitude })
}

/// digits [. digits] [e [sign] digits], with at least one digit before the exponent.
fn is_decimal_literal(text: &[u8]) -> bool {
    let mut i = 0;
    let integer_digits = text.iter().take_while(|b| b.is_ascii_digit()).count();
    i += integer_digits;
    let mut fraction_digits = 0;
    if text.get(i) == Some(&b'.') {
        i += 1;
        fraction_digits = text[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        i += fraction_digits;
    }
    if integer_digits + fraction_digits == 0 {
        return false;
    }
    if matches!(text.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(text.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exponent_digits = text[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        if exponent_digits == 0 {
            return false;
        }
        i += exponent_digits;
    }
    i == text.len()
}

/// `bytes.fromhex(s)`: pairs of hex digits, ASCII whitespace allowed before each pair. None where
/// Python raises ValueError (odd length, a non-hex or non-ASCII character).
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() / 2);
    let mut i = 0;
    while i < bytes.len() {
        if is_ascii_space(bytes[i]) {
            i += 1;
            continue;
        }
        let high = hex_digit(bytes[i])?;
        let low = hex_digit(*bytes.get(i + 1)?)?;
        out.push(high << 4 | low);
        i += 2;
    }
    Some(out)
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn base64_digit(b: u8) -> Option<u8> {
    match b {
        b'A'..=b'Z' => Some(b - b'A'),
        b'a'..=b'z' => Some(b - b'a' + 26),
        b'0'..=b'9' => Some(b - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// `binascii.a2b_base64(s, strict_mode=True)`, what `base64.b64decode(s, validate=True)` runs in
/// Python 3.11: only alphabet characters, no leading padding, no data once padding started, and
/// nothing after the padding that completes a quad (padding after a whole quad is ignored). Bits
/// past the last whole byte are ignored, as there.
pub fn b64decode_strict(text: &[u8]) -> Option<Vec<u8>> {
    if text.first() == Some(&b'=') {
        return None; // leading padding
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut quad_pos = 0u8;
    let mut left = 0u8;
    let mut pads = 0u8;
    let mut padding_started = false;
    for (i, &b) in text.iter().enumerate() {
        if b == b'=' {
            padding_started = true;
            if quad_pos >= 2 {
                pads += 1;
            }
            if quad_pos >= 2 && quad_pos + pads >= 4 {
                // the quad is complete: anything after the padding is an error
                return (i + 1 == text.len()).then_some(out);
            }
            continue;
        }
        let digit = base64_digit(b)?;
        if padding_started {
            return None; // discontinuous padding
        }
        pads = 0;
        match quad_pos {
            0 => {
                left = digit;
                quad_pos = 1;
            }
            1 => {
                out.push(left << 2 | digit >> 4);
                left = digit & 0x0f;
                quad_pos = 2;
            }
            2 => {
                out.push(left << 4 | digit >> 2);
                left = digit & 0x03;
                quad_pos = 3;
            }
            _ => {
                out.push(left << 6 | digit);
                quad_pos = 0;
            }
        }
    }
    (quad_pos == 0).then_some(out)
}

/// The exact decimal value of a whole, finite float (Python's `int(f)` then `str()`).
pub fn whole_float_decimal(f: f64) -> String {
    let bits = f.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    let (mantissa, shift) = if exponent == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1u64 << 52), exponent - 1075)
    };
    let mut text = String::new();
    if f.is_sign_negative() && mantissa != 0 {
        text.push('-');
    }
    if shift <= 0 {
        // whole, so the low bits shifted out are zero
        let _ = write!(text, "{}", mantissa >> shift.unsigned_abs().min(63));
        return text;
    }
    // little-endian limbs of 10^9
    let mut limbs: Vec<u32> = vec![(mantissa % 1_000_000_000) as u32];
    let mut high = mantissa / 1_000_000_000;
    while high > 0 {
        limbs.push((high % 1_000_000_000) as u32);
        high /= 1_000_000_000;
    }
    for _ in 0..shift {
        let mut carry = 0u32;
        for limb in &mut limbs {
            let doubled = *limb * 2 + carry;
            *limb = doubled % 1_000_000_000;
            carry = doubled / 1_000_000_000;
        }
        if carry > 0 {
            limbs.push(carry);
        }
    }
    let mut limbs = limbs.iter().rev();
    if let Some(first) = limbs.next() {
        let _ = write!(text, "{first}");
    }
    for limb in limbs {
        let _ = write!(text, "{limb:09}");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn float_repr_is_pythons() {
        for (f, expected) in [
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (0.1, "0.1"),
            (1.0 / 3.0, "0.3333333333333333"),
            (100.0, "100.0"),
            (1e22, "1e+22"),
            (1.5e-7, "1.5e-07"),
            (12345.678, "12345.678"),
            (-2.5, "-2.5"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(float_repr(f), expected, "{f:e}");
        }
    }

    #[test]
    fn float_repr_switches_notation_like_python() {
        let cases = [
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1234567890123456.8, "1234567890123456.8"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (1.5e-5, "1.5e-05"),
            (1e100, "1e+100"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (0.1, "0.1"),
            (123.0, "123.0"),
            (-2.5, "-2.5"),
            (0.0, "0.0"),
        ];
        for (x, repr) in cases {
            assert_eq!(float_repr(x), repr, "{x:e}");
        }
    }

    #[test]
    fn float_halfway_between_two_shortest_candidates_takes_the_even_digit() {
        assert_eq!(
            float_repr(616_542_274_417_506.0 + 0.25),
            "616542274417506.2"
        );
        assert_eq!(
            float_repr(616_542_274_417_506.0 + 0.75),
            "616542274417506.8"
        );
        assert_eq!(
            float_repr(79_892_581_385_186.0 + 0.125),
            "79892581385186.12"
        );
    }

    #[test]
    fn float_repr_breaks_a_tie_of_shortest_digits_to_even() {
        // exactly 1404902903698710.25: .2 and .3 are both shortest and equally near
        assert_eq!(float_repr(1404902903698710.2), "1404902903698710.2");
        assert_eq!(float_repr(168656337330695.12), "168656337330695.12");
    }

    #[test]
    fn str_repr_picks_quotes_and_escapes_as_python() {
        for (s, expected) in [
            ("plain", "'plain'"),
            ("it's", "\"it's\""),
            ("say \"hi\"", "'say \"hi\"'"),
            ("both ' \"", "'both \\' \"'"),
            ("tab\tnl\nret\rback\\", "'tab\\tnl\\nret\\rback\\\\'"),
            ("\x00\x1f\x7f", "'\\x00\\x1f\\x7f'"),
            ("\u{80}\u{9f}\u{a0}\u{ad}", "'\\x80\\x9f\\xa0\\xad'"),
            (
                "é\u{200b}\u{2028}\u{d7ff}\u{e000}",
                "'é\\u200b\\u2028\\ud7ff\\ue000'",
            ),
            (
                "\u{1f600}\u{e0001}\u{10ffff}\u{378}",
                "'😀\\U000e0001\\U0010ffff\\u0378'",
            ),
            ("", "''"),
        ] {
            assert_eq!(str_repr(s), expected);
        }
    }

    #[test]
    fn repr_of_json_values_is_pythons() {
        let value = json!([
            1,
            -2,
            18446744073709551615u64,
            1.5,
            1e16,
            true,
            false,
            null,
            "a",
            [],
            {}
        ]);
        assert_eq!(
            repr(&value),
            "[1, -2, 18446744073709551615, 1.5, 1e+16, True, False, None, 'a', [], {}]"
        );
        assert_eq!(
            repr(&json!({"k": 1, "j": ["x'"]})),
            "{'k': 1, 'j': [\"x'\"]}"
        );
    }

    #[test]
    fn int_strings_follow_python_int() {
        for (s, expected) in [
            ("1", 1),
            (" 1 ", 1),
            ("+1", 1),
            ("-0", 0),
            ("-12", -12),
            ("1_0", 10),
            ("0_7", 7),
            ("007", 7),
            ("\x0b1\x0c", 1),
            ("\u{2000}1\u{3000}", 1),
            ("\u{85}1", 1),
            ("\u{661}\u{662}", 12),
            ("\u{ff11}", 1),
            ("\u{1d7ce}", 0),
        ] {
            assert_eq!(parse_int(s), Some(PyInt::Small(expected)), "{s:?}");
        }
        for s in [
            "", " ", "+", "- 1", "1__0", "_1", "1_", "\x1c1", "1\x1c", "1\x00", "\x7f1", "²",
            "1.0", "0x10", "1e3",
        ] {
            assert_eq!(parse_int(s), None, "{s:?}");
        }
    }

    #[test]
    fn int_strings_past_4300_digits_are_refused_as_python_does() {
        assert_eq!(parse_int(&"0".repeat(4300)), Some(PyInt::Small(0)));
        assert_eq!(parse_int(&"0".repeat(4301)), None);
        assert_eq!(parse_int(&format!("{}1", "1_".repeat(4300))), None);
        let long = "9".repeat(40);
        assert_eq!(
            parse_int(&format!("-00{long}")),
            Some(PyInt::Big(format!("-{long}")))
        );
    }

    #[test]
    fn float_strings_follow_python_float() {
        for (s, expected) in [
            ("1.5", 1.5),
            (" 1.5\n", 1.5),
            ("1_0.5", 10.5),
            ("1e1_0", 1e10),
            ("-iNfinity", f64::NEG_INFINITY),
            ("inf", f64::INFINITY),
            ("\u{661}.\u{665}", 1.5),
            ("\u{661}e\u{661}", 10.0),
            ("\u{2000}1.5", 1.5),
            ("1e400", f64::INFINITY),
            (".5", 0.5),
            ("5.", 5.0),
            ("1E+5", 1e5),
        ] {
            assert_eq!(parse_float(s), Some(expected), "{s:?}");
        }
        for s in [
            "1_.5", "1._5", "in_f", ".", "e5", "1e", "0x10", "\x1c1.5", "1.5\x1f", "infinit",
            "1.5_", "1_e5", "1e_5", "1d5", " ", "",
        ] {
            assert_eq!(parse_float(s), None, "{s:?}");
        }
    }

    #[test]
    fn float_nan_strings_keep_their_sign() {
        assert_eq!(
            parse_float("nan").map(f64::to_bits),
            Some(0x7ff8_0000_0000_0000)
        );
        assert_eq!(
            parse_float("+NaN").map(f64::to_bits),
            Some(0x7ff8_0000_0000_0000)
        );
        assert_eq!(
            parse_float("-nan").map(f64::to_bits),
            Some(0xfff8_0000_0000_0000)
        );
    }

    #[test]
    fn from_hex_skips_whitespace_between_pairs_only() {
        assert_eq!(from_hex(" 0a 0B\t0c\n"), Some(vec![0x0a, 0x0b, 0x0c]));
        assert_eq!(from_hex("0a\x0b0b"), Some(vec![0x0a, 0x0b]));
        assert_eq!(from_hex("\n"), Some(vec![]));
        for s in ["0 a", "abc", "0g", "0a\x1c0b", "0a\u{a0}0b", "é0"] {
            assert_eq!(from_hex(s), None, "{s:?}");
        }
    }

    #[test]
    fn strict_base64_accepts_and_refuses_as_binascii() {
        for (s, expected) in [
            ("wTlc", &b"\xc19\\"[..]),
            ("wTlc====", b"\xc19\\"),
            ("wTlc=", b"\xc19\\"),
            ("wT==", b"\xc1"),
            ("QUI=", b"AB"),
            ("", b""),
        ] {
            assert_eq!(
                b64decode_strict(s.as_bytes()).as_deref(),
                Some(expected),
                "{s:?}"
            );
        }
        for s in [
            "wT==x",
            "wTlc=x",
            "=",
            "====",
            "wT=",
            "wT=x=",
            "wTl==",
            "wTl=a",
            "wTlcwT==wTlc",
            "w===",
            "w",
            "wT===",
            "wTl===",
            "wTlc=wT=",
            "wT!=",
            "wT\n==",
        ] {
            assert_eq!(b64decode_strict(s.as_bytes()), None, "{s:?}");
        }
    }

    #[test]
    fn whole_float_decimal_is_exact() {
        assert_eq!(whole_float_decimal(1e20), "100000000000000000000");
        assert_eq!(
            whole_float_decimal(-18446744073709551616.0),
            "-18446744073709551616"
        );
        assert_eq!(whole_float_decimal(-0.0), "0");
        assert_eq!(
            whole_float_decimal(1e300),
            "1000000000000000052504760255204420248704468581108159154915854115511802457988908195786\
             371375080447864043704443832883878176942523235360430575644792184786706982848387200926\
             575803737830233794788090059368953234970799945081119038967640880074652742780142494579\
             258788820056842838115669472196386865459400540160"
        );
    }

    #[test]
    fn unicode_tables_answer_for_python() {
        assert!(is_printable('é' as u32));
        assert!(!is_printable(0xad)); // soft hyphen: format character
        assert!(!is_printable(0x378)); // unassigned
        assert!(!is_printable(0x10ffff));
        assert_eq!(decimal_digit(0x669), Some(9));
        assert_eq!(decimal_digit(0x1d7ff), Some(9));
        assert_eq!(decimal_digit(0xb2), None); // superscript two is a digit, not a decimal
        assert_eq!(decimal_digit(0x80), None);
    }
}

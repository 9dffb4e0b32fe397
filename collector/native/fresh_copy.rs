//! Fresh copies of a serialized OTLP export request for the load generator: a new salt in its
//! trace and conversation ids, its span times moved to the moment of sending.
//!
//! The Python specification is `collector/bench/traces.py` (`salted_copy`, then
//! `Restamp.fresh`); a unit test there holds the two to the same bytes. A copy is the template,
//! one `memcpy`, with 8-byte writes at offsets found once and one scan for the salt's hex text.

use memchr::memmem::{find_iter, Finder};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A protobuf request whose raw 8-byte salt (in its trace ids) and its hex text (in its
/// conversation ids) are replaced in every copy, and whose fixed64 span times are rewritten.
pub struct Template {
    bytes: Vec<u8>,
    /// Where the raw salt is in the template: `bytes.replace(salt, new)` replaces exactly these.
    raw_at: Vec<usize>,
    hex: Finder<'static>,
    /// (offset, value) of each span time, as `Restamp` found them in the template.
    times: Vec<(usize, i64)>,
    made_ns: i64,
}

impl Template {
    pub fn new(
        bytes: Vec<u8>,
        salt: [u8; 8],
        times: Vec<(usize, i64)>,
        made_ns: i64,
    ) -> Result<Template, String> {
        if let Some((at, _)) = times.iter().find(|(at, _)| at + 8 > bytes.len()) {
            return Err(format!(
                "a time at offset {at} runs past the template's {} bytes",
                bytes.len()
            ));
        }
        let raw_at = find_iter(&bytes, &salt).collect();
        let hex = Finder::new(hex_text(&salt).as_slice()).into_owned();
        Ok(Template {
            bytes,
            raw_at,
            hex,
            times,
            made_ns,
        })
    }

    /// The template with `salt` in place of its own (raw, then as hex text, each occurrence
    /// left to right as `bytes.replace` finds them) and its times moved by `now_ns - made_ns`.
    pub fn copy(&self, salt: [u8; 8], now_ns: i64) -> Vec<u8> {
        let mut copy = self.bytes.clone();
        for &at in &self.raw_at {
            copy[at..at + 8].copy_from_slice(&salt);
        }
        // Scanned again after the raw pass, as Python's second `replace` reads its first one's
        // output: the new raw bytes could (very rarely) complete or break a hex occurrence.
        let hex_at: Vec<usize> = self.hex.find_iter(&copy).collect();
        let hex = hex_text(&salt);
        for at in hex_at {
            copy[at..at + 16].copy_from_slice(&hex);
        }
        let shift = now_ns.wrapping_sub(self.made_ns);
        for &(at, value) in &self.times {
            copy[at..at + 8].copy_from_slice(&value.wrapping_add(shift).to_le_bytes());
        }
        copy
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }
}

/// Lowercase hex, as Python's `bytes.hex()`.
fn hex_text(bytes: &[u8; 8]) -> [u8; 16] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0; 16];
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = DIGITS[usize::from(b >> 4)];
        out[2 * i + 1] = DIGITS[usize::from(b & 15)];
    }
    out
}

/// The template as Python holds it: handed to `grpc_load`, or copied once by `copy` (the
/// differential test against `salted_copy` and `Restamp.fresh`).
#[pyclass(module = "collector.normalize._native", frozen)]
pub struct FreshCopies {
    pub template: std::sync::Arc<Template>,
}

#[pymethods]
impl FreshCopies {
    /// `template` with raw `salt` (8 bytes), and the span times at `offsets` (their `values`)
    /// moved from `made_ns`.
    #[new]
    fn new(
        template: &[u8],
        salt: &[u8],
        offsets: Vec<usize>,
        values: Vec<i64>,
        made_ns: i64,
    ) -> PyResult<Self> {
        let salt: [u8; 8] = salt
            .try_into()
            .map_err(|_| PyValueError::new_err("the salt is 8 raw bytes"))?;
        if offsets.len() != values.len() {
            return Err(PyValueError::new_err("one value for each offset"));
        }
        let times = offsets.into_iter().zip(values).collect();
        let template = Template::new(template.to_vec(), salt, times, made_ns)
            .map_err(PyValueError::new_err)?;
        Ok(FreshCopies {
            template: std::sync::Arc::new(template),
        })
    }

    /// One copy with `salt` (8 raw bytes) in place of the template's, its times moved to
    /// `now_ns`.
    fn copy<'py>(
        &self,
        py: Python<'py>,
        salt: &[u8],
        now_ns: i64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let salt: [u8; 8] = salt
            .try_into()
            .map_err(|_| PyValueError::new_err("the salt is 8 raw bytes"))?;
        Ok(PyBytes::new(py, &self.template.copy(salt, now_ns)))
    }

    fn __len__(&self) -> usize {
        self.template.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SALT: [u8; 8] = [0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3];

    #[test]
    fn salt_raw_and_hex_and_times_are_replaced() {
        let mut bytes = b"id:".to_vec();
        bytes.extend(SALT);
        bytes.extend(b" conv-deadbeef00010203-0 t:");
        let at = bytes.len();
        bytes.extend(1_000i64.to_le_bytes());
        let template = Template::new(bytes, SALT, vec![(at, 1_000)], 500).unwrap();
        let new = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef];
        let copy = template.copy(new, 2_500);
        let mut expected = b"id:".to_vec();
        expected.extend(new);
        expected.extend(b" conv-0123456789abcdef-0 t:");
        expected.extend(3_000i64.to_le_bytes());
        assert_eq!(copy, expected);
    }

    #[test]
    fn a_time_past_the_end_is_refused() {
        let err = Template::new(vec![0; 10], SALT, vec![(4, 1)], 0)
            .err()
            .unwrap();
        assert_eq!(err, "a time at offset 4 runs past the template's 10 bytes");
    }

    #[test]
    fn hex_is_lowercase_as_python_writes_it() {
        assert_eq!(&hex_text(&SALT), b"deadbeef00010203");
    }
}

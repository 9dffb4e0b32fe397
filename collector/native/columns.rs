//! Arrow column builders over plain vectors, so JSON and hex text are written straight into a
//! column's value buffer, and the struct array a batch is exported as.

use std::sync::Arc;

use arrow_array::types::ArrowPrimitiveType;
use arrow_array::{ArrayRef, ListArray, PrimitiveArray, StringArray, StructArray};
use arrow_buffer::{Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, FieldRef, Fields};

use crate::json;
use crate::semconv::Attrs;
use serde_json::Value;

/// Why columns could not be built: Arrow `string` offsets are 32-bit, so one column of one
/// request holds at most 2 GiB of text.
#[derive(Debug, Clone, PartialEq)]
pub struct TooLarge(pub &'static str);

/// Each byte's two lowercase hex digits.
const HEX_PAIRS: [[u8; 2]; 256] = hex_pairs();

const fn hex_pairs() -> [[u8; 2]; 256] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [[0; 2]; 256];
    let mut b = 0;
    while b < 256 {
        out[b] = [DIGITS[b >> 4], DIGITS[b & 15]];
        b += 1;
    }
    out
}

/// A `string` column.
pub struct Utf8Col {
    offsets: Vec<i32>,
    values: Vec<u8>,
    nulls: NullBufferBuilder,
}

impl Utf8Col {
    pub fn with_capacity(rows: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        Utf8Col {
            offsets,
            values: Vec::with_capacity(bytes),
            nulls: NullBufferBuilder::new(rows),
        }
    }

    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Room for `bytes` more text.
    pub fn reserve(&mut self, bytes: usize) {
        self.values.reserve(bytes);
    }

    fn end(&mut self) {
        // Wraps past 2 GiB; `finish` refuses the column then, so no wrapped offset escapes.
        self.offsets.push(self.values.len() as i32);
    }

    pub fn push(&mut self, s: &str) {
        self.values.extend_from_slice(s.as_bytes());
        self.end();
        self.nulls.append_non_null();
    }

    pub fn push_null(&mut self) {
        self.end();
        self.nulls.append_null();
    }

    /// None as null.
    pub fn push_opt(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.push(s),
            None => self.push_null(),
        }
    }

    /// "" as null, as Python's `value or None`.
    pub fn push_or_null(&mut self, s: &str) {
        if s.is_empty() {
            self.push_null()
        } else {
            self.push(s)
        }
    }

    /// Lowercase hex of `bytes`, as Python's `bytes.hex()`.
    pub fn push_hex(&mut self, bytes: &[u8]) {
        write_hex(&mut self.values, bytes);
        self.end();
        self.nulls.append_non_null();
    }

    /// Compact JSON of `map`, as orjson writes it.
    pub fn push_map(&mut self, map: &Attrs) {
        json::write_map(&mut self.values, map);
        self.commit();
    }

    /// Compact JSON of `value`, as orjson writes it.
    pub fn push_value(&mut self, value: &Value) {
        json::write_value(&mut self.values, value);
        self.commit();
    }

    /// Writes one value piecewise: append UTF-8 to the returned buffer, then call `commit`.
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.values
    }

    /// Ends the value written through `buffer`.
    pub fn commit(&mut self) {
        self.end();
        self.nulls.append_non_null();
    }

    pub fn finish(mut self, name: &'static str) -> Result<StringArray, TooLarge> {
        if self.values.len() > i32::MAX as usize {
            return Err(TooLarge(name));
        }
        let offsets = OffsetBuffer::new(ScalarBuffer::from(self.offsets));
        let values = Buffer::from_vec(self.values);
        // SAFETY: the offsets start at 0 and never decrease (each is the buffer's length when a
        // value ended), the last is the buffer's length and fits an i32 (checked above), and
        // every value is UTF-8: whole `&str`s, hex digits, or serde_json's output.
        Ok(unsafe { StringArray::new_unchecked(offsets, values, self.nulls.finish()) })
    }
}

/// Lowercase hex of `bytes` appended to `out`.
pub fn write_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    for &b in bytes {
        out.extend_from_slice(&HEX_PAIRS[usize::from(b)]);
    }
}

/// An unsigned integer in decimal, appended to `out`.
pub fn write_uint(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// A primitive column (`uint32`, `int64`, ...).
pub struct PrimCol<T: ArrowPrimitiveType> {
    values: Vec<T::Native>,
    nulls: NullBufferBuilder,
}

impl<T: ArrowPrimitiveType> PrimCol<T> {
    pub fn with_capacity(rows: usize) -> Self {
        PrimCol {
            values: Vec::with_capacity(rows),
            nulls: NullBufferBuilder::new(rows),
        }
    }

    pub fn push(&mut self, v: T::Native) {
        self.values.push(v);
        self.nulls.append_non_null();
    }

    pub fn push_opt(&mut self, v: Option<T::Native>) {
        match v {
            Some(v) => self.push(v),
            None => {
                self.values.push(T::Native::default());
                self.nulls.append_null();
            }
        }
    }

    pub fn finish(mut self) -> PrimitiveArray<T> {
        PrimitiveArray::new(ScalarBuffer::from(self.values), self.nulls.finish())
    }
}

/// A `list<item: string>` column.
pub struct StrListCol {
    offsets: Vec<i32>,
    items: Utf8Col,
    nulls: NullBufferBuilder,
}

impl StrListCol {
    pub fn with_capacity(rows: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        StrListCol {
            offsets,
            items: Utf8Col::with_capacity(0, 0),
            nulls: NullBufferBuilder::new(rows),
        }
    }

    /// The items of one row, null when there are none (as Python's `keys or None`).
    pub fn push_or_null<'a, I: IntoIterator<Item = &'a str>>(&mut self, items: I) {
        for item in items {
            self.items.push(item);
        }
        let count = self.items.len();
        if count == *self.offsets.last().unwrap_or(&0) as usize {
            self.nulls.append_null();
        } else {
            self.nulls.append_non_null();
        }
        self.offsets.push(count as i32);
    }

    pub fn finish(mut self, name: &'static str) -> Result<ListArray, TooLarge> {
        let items = self.items.finish(name)?;
        let offsets = OffsetBuffer::new(ScalarBuffer::from(self.offsets));
        Ok(ListArray::new(
            item_field(),
            offsets,
            Arc::new(items),
            self.nulls.finish(),
        ))
    }
}

fn item_field() -> FieldRef {
    Arc::new(Field::new("item", DataType::Utf8, true))
}

/// The type of a `list<item: string>` column.
pub fn str_list() -> DataType {
    DataType::List(item_field())
}

/// A nullable field per (name, type).
pub fn fields(columns: &[(&str, DataType)]) -> Fields {
    columns
        .iter()
        .map(|(name, dtype)| Field::new(*name, dtype.clone(), true))
        .collect()
}

/// The columns as one struct array (no nulls of its own), the form a batch is exported in.
pub fn struct_array(fields: Fields, columns: Vec<ArrayRef>) -> StructArray {
    StructArray::new(fields, columns, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::types::{Int64Type, UInt32Type};
    use arrow_array::Array;

    #[test]
    fn utf8_column_keeps_values_and_nulls() {
        let mut col = Utf8Col::with_capacity(4, 8);
        col.push("a");
        col.push_null();
        col.push_or_null("");
        col.push_opt(Some("bc"));
        let array = col.finish("c").unwrap();
        assert_eq!(array.len(), 4);
        assert_eq!(array.value(0), "a");
        assert!(array.is_null(1) && array.is_null(2));
        assert_eq!(array.value(3), "bc");
    }

    #[test]
    fn utf8_column_without_nulls_has_no_null_buffer() {
        let mut col = Utf8Col::with_capacity(1, 1);
        col.push("x");
        assert!(col.finish("c").unwrap().nulls().is_none());
    }

    #[test]
    fn hex_is_lowercase_like_python() {
        let mut col = Utf8Col::with_capacity(2, 0);
        col.push_hex(&[0x00, 0xab, 0x1f, 0xff]);
        col.push_hex(&[]);
        let array = col.finish("c").unwrap();
        assert_eq!(array.value(0), "00ab1fff");
        assert_eq!(array.value(1), "");
        assert!(array.is_valid(1));
    }

    #[test]
    fn piecewise_value_is_one_value() {
        let mut col = Utf8Col::with_capacity(1, 0);
        col.buffer().extend_from_slice(b"[1,");
        write_uint(col.buffer(), 0);
        col.buffer().push(b']');
        col.commit();
        col.push_value(&serde_json::json!({"a": 1}));
        let serde_json::Value::Object(map) = serde_json::json!({"b": [null]}) else {
            unreachable!()
        };
        col.push_map(&Attrs::from(map));
        let array = col.finish("c").unwrap();
        assert_eq!(array.value(0), "[1,0]");
        assert_eq!(array.value(1), "{\"a\":1}");
        assert_eq!(array.value(2), "{\"b\":[null]}");
    }

    #[test]
    fn unsigned_integers_in_decimal() {
        for n in [0, 7, 10, 99, 100, 4294967295, u64::MAX] {
            let mut out = Vec::new();
            write_uint(&mut out, n);
            assert_eq!(String::from_utf8(out).unwrap(), n.to_string());
        }
    }

    #[test]
    fn primitive_column_nulls() {
        let mut col = PrimCol::<Int64Type>::with_capacity(2);
        col.push(5);
        col.push_opt(None);
        let array = col.finish();
        assert_eq!(array.value(0), 5);
        assert!(array.is_null(1));
        let mut col = PrimCol::<UInt32Type>::with_capacity(1);
        col.push(u32::MAX);
        assert!(col.finish().nulls().is_none());
    }

    #[test]
    fn string_list_is_null_when_empty() {
        let mut col = StrListCol::with_capacity(3);
        col.push_or_null(["a", "a"]);
        col.push_or_null(std::iter::empty());
        col.push_or_null(["b"]);
        let array = col.finish("l").unwrap();
        assert_eq!(array.data_type(), &str_list());
        assert!(array.is_valid(0) && array.is_null(1) && array.is_valid(2));
        let first = array.value(0);
        let first = first.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(first.iter().collect::<Vec<_>>(), [Some("a"), Some("a")]);
        assert_eq!(array.value_length(2), 1);
    }
}

//! The distinct rows of three string columns, for a hook that runs on the event loop for every
//! acknowledged batch: the guard's note of the runs that name a conversation.
//!
//! In Python that hook made a str of every cell (pyarrow's `to_pylist`) to keep a few dozen
//! distinct rows out of hundreds; here only the distinct rows become Python strings.

use std::collections::HashSet;

use arrow_array::{Array, StringArray};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::arrow_py::import_struct;

type Row<'a> = (&'a str, Option<&'a str>, &'a str);
type OwnedRow = (String, Option<String>, String);

fn column<'a>(batch: &'a arrow_array::StructArray, name: &str) -> PyResult<&'a StringArray> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| PyValueError::new_err(format!("distinct rows: no string column {name}")))
}

fn cell(array: &StringArray, i: usize) -> Option<&str> {
    (!array.is_null(i)).then(|| array.value(i))
}

/// The distinct (first, second, third) rows of the batch whose first and third cells are not
/// null, in the order first seen.
fn distinct<'a>(columns: [&'a StringArray; 3]) -> Vec<Row<'a>> {
    let [first, second, third] = columns;
    let mut seen: HashSet<Row<'a>> = HashSet::new();
    let mut rows = Vec::new();
    for i in 0..first.len() {
        let (Some(key), Some(last)) = (cell(first, i), cell(third, i)) else {
            continue;
        };
        let row = (key, cell(second, i), last);
        if seen.insert(row) {
            rows.push(row);
        }
    }
    rows
}

/// The distinct rows of `names` (three string columns) of `batch` (an Arrow record batch)
/// whose first and third cells are not null, in the order first seen, as (str, str | None,
/// str).
#[pyfunction]
pub fn distinct_rows(
    py: Python<'_>,
    batch: &Bound<'_, PyAny>,
    names: (String, String, String),
) -> PyResult<Vec<OwnedRow>> {
    let batch = import_struct(batch, "distinct rows")?;
    let columns = [
        column(&batch, &names.0)?,
        column(&batch, &names.1)?,
        column(&batch, &names.2)?,
    ];
    let rows = py.detach(|| distinct(columns));
    Ok(rows
        .into_iter()
        .map(|(a, b, c)| (a.to_owned(), b.map(str::to_owned), c.to_owned()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_without_a_first_or_third_cell_are_skipped_and_repeats_kept_once_in_order() {
        let first = StringArray::from(vec![Some("c1"), None, Some("c2"), Some("c1"), Some("c1")]);
        let second = StringArray::from(vec![Some("s"), Some("s"), None, Some("s"), Some("t")]);
        let third = StringArray::from(vec![Some("t1"), Some("t2"), Some("t3"), Some("t1"), None]);
        assert_eq!(
            distinct([&first, &second, &third]),
            vec![("c1", Some("s"), "t1"), ("c2", None, "t3")]
        );
    }
}

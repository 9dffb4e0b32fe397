//! Arrow across the Python boundary: batches handed to Python and record batches read from it,
//! both through the Arrow PyCapsule interface (no copy).

use std::sync::Mutex;

use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{Array, StructArray};
use arrow_schema::DataType;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// A batch of rows (one request's accepted rows, a round's table, a round's results), exported
/// through the Arrow PyCapsule interface as a struct array whose fields are the batch's columns (`pyarrow.record_batch(batch)` takes it without
/// copying).
#[pyclass(frozen, module = "collector.normalize._native")]
pub(crate) struct ArrowBatch {
    array: StructArray,
    /// Exported while decoding, without the GIL; the first `__arrow_c_array__` hands it over.
    exported: Mutex<Option<Exported>>,
}

/// The C data interface structs of a batch, made before anyone asks for them.
struct Exported {
    schema: FFI_ArrowSchema,
    array: FFI_ArrowArray,
}

// SAFETY: both are owned C structs with their own release callbacks, moved whole from the
// decoding thread to the one that hands them over, and never shared meanwhile.
unsafe impl Send for Exported {}

impl ArrowBatch {
    /// Exports the batch at once (the caller has released the GIL): building the C structs of
    /// 40 columns cost more than importing them, and would otherwise hold the GIL.
    pub(crate) fn new(array: StructArray) -> Self {
        let exported = FFI_ArrowSchema::try_from(array.data_type())
            .ok()
            .map(|schema| Exported {
                schema,
                array: FFI_ArrowArray::new(&array.to_data()),
            });
        Self {
            array,
            exported: Mutex::new(exported),
        }
    }
}

#[pymethods]
impl ArrowBatch {
    /// The ("arrow_schema", "arrow_array") capsules. A requested schema is not honoured: the
    /// columns have one schema, the store's (the protocol lets the producer ignore it).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>)> {
        let _ = requested_schema;
        let ready = self.exported.lock().ok().and_then(|mut e| e.take());
        let (schema, array) = match ready {
            Some(Exported { schema, array }) => (schema, array),
            None => (
                FFI_ArrowSchema::try_from(self.array.data_type())
                    .map_err(|e| PyValueError::new_err(e.to_string()))?,
                FFI_ArrowArray::new(&self.array.to_data()),
            ),
        };
        // Each capsule owns its struct; a consumer that imports it moves the contents out and
        // clears `release`, and dropping the capsule releases whatever was not taken.
        let schema = PyCapsule::new(py, schema, Some(c"arrow_schema".to_owned()))?;
        let array = PyCapsule::new(py, array, Some(c"arrow_array".to_owned()))?;
        Ok((schema, array))
    }

    fn __len__(&self) -> usize {
        self.array.len()
    }
}

/// A pyarrow RecordBatch (or anything exporting one struct array) read without copying.
pub(crate) fn import_struct(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<StructArray> {
    let (schema, array): (Bound<'_, PyCapsule>, Bound<'_, PyCapsule>) = obj
        .call_method0("__arrow_c_array__")
        .map_err(|e| PyValueError::new_err(format!("{what}: not an Arrow record batch ({e})")))?
        .extract()?;
    let schema = schema
        .pointer_checked(Some(c"arrow_schema"))?
        .cast::<FFI_ArrowSchema>();
    let array = array
        .pointer_checked(Some(c"arrow_array"))?
        .cast::<FFI_ArrowArray>();
    // SAFETY: the capsules hold the C structs their names say, alive while we hold the
    // capsules; the array is moved out (its release left to us), the schema only read.
    let data = unsafe {
        let array = std::ptr::replace(array.as_ptr(), FFI_ArrowArray::empty());
        from_ffi(array, &*schema.as_ptr())
    }
    .map_err(|e| PyValueError::new_err(format!("{what}: {e}")))?;
    if !matches!(data.data_type(), DataType::Struct(_)) {
        return Err(PyValueError::new_err(format!("{what}: not a record batch")));
    }
    Ok(StructArray::from(data))
}

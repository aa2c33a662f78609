//! `knee._engine.grpc_compile` and `grpc_describe`: .proto files compiled (protox, no protoc) and a method found
//! in the descriptors, its message checked, before any load. Errors are `ValueError`s of one sentence.

// pyo3 0.22's #[pyfunction] expansion trips this lint on every PyResult return.
#![allow(clippy::useless_conversion)]

use knee_engine as core;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The FileDescriptorSet (bytes) of `files` and their imports, looked for in `includes` (none: each file's
/// directory).
#[pyfunction]
fn grpc_compile(py: Python<'_>, files: Vec<String>, includes: Vec<String>) -> PyResult<Py<PyBytes>> {
    let set = py
        .allow_threads(|| core::grpc_compile(&files, &includes))
        .map_err(PyValueError::new_err)?;
    Ok(PyBytes::new_bound(py, &set).unbind())
}

/// Method `method` in `descriptors`: (path, input type, output type, client streaming, server streaming);
/// `message` (JSON), when given, checked against its input type.
#[pyfunction]
#[pyo3(signature = (descriptors, method, message=None))]
fn grpc_describe(
    descriptors: &[u8],
    method: &str,
    message: Option<&str>,
) -> PyResult<(String, String, String, bool, bool)> {
    let m = core::grpc_describe(descriptors, method, message).map_err(PyValueError::new_err)?;
    Ok((m.path, m.input, m.output, m.client_streaming, m.server_streaming))
}

/// The FileDescriptorSet (bytes) of `service` and its imports, from the reflection service of the server an http
/// client spec (JSON: its URL's origin, http2, TLS, headers) names.
#[pyfunction]
fn grpc_reflect(py: Python<'_>, spec_json: &str, service: &str) -> PyResult<Py<PyBytes>> {
    let spec: core::HttpSpec =
        serde_json::from_str(spec_json).map_err(|e| PyValueError::new_err(format!("a bad client spec ({e})")))?;
    let set = py
        .allow_threads(|| core::grpc_reflect(&spec, service))
        .map_err(PyValueError::new_err)?;
    Ok(PyBytes::new_bound(py, &set).unbind())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(grpc_reflect, m)?)?;
    m.add_function(wrap_pyfunction!(grpc_compile, m)?)?;
    m.add_function(wrap_pyfunction!(grpc_describe, m)?)?;
    Ok(())
}

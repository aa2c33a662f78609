//! PyO3 glue: `knee._engine`. Conversion and GIL handling only; the friendly API is in Python.

use pyo3::prelude::*;

mod engine;
mod target;

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    engine::register(m)?;
    target::register(m)?;
    Ok(())
}

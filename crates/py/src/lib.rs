//! PyO3 glue: `knee._engine`. Conversion and GIL handling only; the friendly API is in Python.

use pyo3::prelude::*;

mod demo_target;
mod engine;
mod grpc;

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    engine::register(m)?;
    demo_target::register(m)?;
    grpc::register(m)?;
    // The package's version (maturin takes it from this crate), without importlib.metadata's 70 ms.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

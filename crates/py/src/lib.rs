//! PyO3 glue: `knee._engine`. Conversion and GIL handling only; the friendly API is in Python.

use std::collections::HashMap;

use pyo3::prelude::*;

mod demo_target;
mod engine;
mod grpc;

/// This network namespace's TCP socket census (knee_engine::sockdiag): (sockets by state code, TIME_WAIT left
/// out; the most ephemeral ports held toward one destination; listening port → its accept queue).
#[pyfunction]
fn tcp_census(py: Python<'_>, lo: u16, hi: u16) -> (HashMap<u8, u32>, u32, HashMap<u16, u32>) {
    let c = py.allow_threads(|| knee_engine::sockdiag::tcp_census((lo, hi)));
    (c.states, c.held, c.waiting)
}

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    engine::register(m)?;
    demo_target::register(m)?;
    grpc::register(m)?;
    m.add_function(wrap_pyfunction!(tcp_census, m)?)?;
    // The package's version (maturin takes it from this crate), without importlib.metadata's 70 ms.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

//! PyO3 glue for the demo target (`knee_demo_target`): `TargetServer` and `target_profiles()`.
//! Conversion and GIL handling only; `python/knee/demo_target.py` and `knee target` are the friendly side.

// pyo3 0.22's #[pymethods]/#[pyfunction] expansion trips this lint on every PyResult return.
#![allow(clippy::useless_conversion)]

use std::time::Duration;

use knee_demo_target::{Config, Server, TargetError};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

fn to_py(e: TargetError) -> PyErr {
    if e.is_os_error() {
        PyOSError::new_err(e.to_string())
    } else {
        PyValueError::new_err(e.to_string())
    }
}

/// A running demo target: `TargetServer(config_toml)` validates, binds and starts it.
#[pyclass(module = "knee._engine", frozen)]
pub struct TargetServer {
    inner: Server,
}

#[pymethods]
impl TargetServer {
    #[new]
    fn new(py: Python<'_>, config_toml: &str) -> PyResult<Self> {
        let cfg = Config::from_toml(config_toml).map_err(to_py)?;
        let inner = py.allow_threads(|| Server::start(cfg)).map_err(to_py)?;
        Ok(TargetServer { inner })
    }

    fn http_port(&self) -> u16 {
        self.inner.http_addr().port()
    }

    fn tcp_port(&self) -> u16 {
        self.inner.tcp_addr().port()
    }

    fn host(&self) -> String {
        self.inner.http_addr().ip().to_string()
    }

    /// The `/admin/stats` document as JSON text.
    fn stats(&self) -> String {
        self.inner.stats_json()
    }

    /// The effective configuration and its model (`/admin/config`) as JSON text.
    fn config_json(&self) -> String {
        self.inner.config_json()
    }

    /// Back to normal, totals zeroed (as `POST /admin/reset`).
    fn reset(&self) {
        self.inner.reset();
    }

    /// Ask it to stop; returns at once.
    fn stop(&self) {
        self.inner.stop();
    }

    /// Wait until stopped (None: for ever), with the GIL released. True when stopped.
    #[pyo3(signature = (timeout_s=None))]
    fn wait(&self, py: Python<'_>, timeout_s: Option<f64>) -> PyResult<bool> {
        let timeout = match timeout_s {
            Some(t) if !(t.is_finite() && t >= 0.0) => {
                return Err(PyValueError::new_err(format!(
                    "timeout_s = {t} is not a duration; use seconds ≥ 0"
                )))
            }
            Some(t) => Some(Duration::from_secs_f64(t)),
            None => None,
        };
        Ok(py.allow_threads(|| self.inner.wait(timeout)))
    }
}

/// Every built-in profile as (name, description).
#[pyfunction]
fn target_profiles() -> Vec<(&'static str, &'static str)> {
    knee_demo_target::profiles()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<TargetServer>()?;
    m.add_function(wrap_pyfunction!(target_profiles, m)?)?;
    Ok(())
}

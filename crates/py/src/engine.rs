//! `knee._engine.Engine` and `ShardResult`: conversion, GIL handling and the engine's typed
//! exceptions (`EngineError` and one subclass per kind of failure, re-exported as `knee.EngineError`).

// pyo3 0.22's #[pymethods] expansion trips this lint on every PyResult return.
#![allow(clippy::useless_conversion)]

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use knee_engine as core;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The engine's exceptions. pyo3 0.22's `create_exception!` tests a `gil-refs` feature this crate
/// does not declare, hence the allow.
#[allow(unexpected_cfgs)]
mod exceptions {
    use pyo3::create_exception;
    use pyo3::exceptions::PyException;

    create_exception!(
        knee._engine,
        EngineError,
        PyException,
        "The engine could not run a shard; the message says why and how to fix it."
    );
    create_exception!(
        knee._engine,
        SpecError,
        EngineError,
        "A mistake in the engine spec (names the key, the value and the fix)."
    );
    create_exception!(
        knee._engine,
        ResolveError,
        EngineError,
        "A host in the spec does not resolve."
    );
    create_exception!(knee._engine, BodyFileError, EngineError, "A body_file cannot be read.");
    create_exception!(knee._engine, TlsError, EngineError, "The TLS client cannot be built.");
    create_exception!(
        knee._engine,
        FdLimitError,
        EngineError,
        "The open-files limit is too low for the clients."
    );
    create_exception!(
        knee._engine,
        ThreadError,
        EngineError,
        "The engine's threads cannot start."
    );
    create_exception!(
        knee._engine,
        CutError,
        EngineError,
        "cut() was called on a shard that cannot be cut."
    );
    create_exception!(
        knee._engine,
        WorkerError,
        EngineError,
        "A worker program did not start or did not answer its start message."
    );
    create_exception!(
        knee._engine,
        DecodeError,
        EngineError,
        "Result bytes cannot be decoded."
    );
    create_exception!(
        knee._engine,
        MergeError,
        EngineError,
        "Two results do not belong together."
    );
}
use exceptions::*;

fn engine_err(e: core::EngineError) -> PyErr {
    let msg = e.to_string();
    match e {
        core::EngineError::Spec(_) => SpecError::new_err(msg),
        core::EngineError::Resolve { .. } => ResolveError::new_err(msg),
        core::EngineError::BodyFile { .. } => BodyFileError::new_err(msg),
        core::EngineError::Tls { .. } => TlsError::new_err(msg),
        core::EngineError::FdLimit { .. } => FdLimitError::new_err(msg),
        core::EngineError::Thread(_) => ThreadError::new_err(msg),
        core::EngineError::Cut(_) => CutError::new_err(msg),
        core::EngineError::Worker(_) => WorkerError::new_err(msg),
        core::EngineError::Barrier(_) => EngineError::new_err(msg),
    }
}

fn spec_err(e: core::SpecError) -> PyErr {
    SpecError::new_err(e.to_string())
}

/// One shard of load: built from a JSON spec, started, observed and stopped from any thread.
#[pyclass(module = "knee._engine", frozen)]
pub struct Engine {
    spec: Mutex<Option<core::Spec>>,
    running: OnceLock<core::Engine>,
}

impl Engine {
    fn running(&self) -> PyResult<&core::Engine> {
        self.running
            .get()
            .ok_or_else(|| PyRuntimeError::new_err("the engine has not been started: call start() first"))
    }
}

#[pymethods]
impl Engine {
    #[new]
    fn new(spec_json: &str) -> PyResult<Self> {
        let spec = core::Spec::from_json(spec_json).map_err(spec_err)?;
        Ok(Self {
            spec: Mutex::new(Some(spec)),
            running: OnceLock::new(),
        })
    }

    /// Start the runtime threads and return once the clients run. `ready`: called (with no
    /// arguments) once every thread is ready, before the clients start; the clients start when it
    /// returns, and what it raises is raised here, with nothing started (a distributed barrier).
    #[pyo3(signature = (ready=None))]
    fn start(&self, py: Python<'_>, ready: Option<PyObject>) -> PyResult<()> {
        let spec = self
            .spec
            .lock()
            .map_err(|_| PyRuntimeError::new_err("engine state poisoned"))?
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("the engine was already started"))?;
        let raised: Mutex<Option<PyErr>> = Mutex::new(None);
        let barrier = || match &ready {
            None => Ok(()),
            Some(f) => Python::with_gil(|py| f.call0(py)).map(|_| ()).map_err(|e| {
                let text = e.to_string();
                *raised.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                core::EngineError::Barrier(text)
            }),
        };
        let started = py.allow_threads(|| core::Engine::start_after(spec, barrier));
        if let Some(e) = raised.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(e);
        }
        let engine = started.map_err(engine_err)?;
        self.running
            .set(engine)
            .map_err(|_| PyRuntimeError::new_err("the engine was already started"))
    }

    /// Live counts and recent percentiles, as JSON.
    fn snapshot(&self, py: Python<'_>) -> PyResult<String> {
        let engine = self.running()?;
        let snap = py.allow_threads(|| engine.snapshot());
        serde_json::to_string(&snap).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// End the run early; in-flight operations are abandoned and client processes killed.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        let engine = self.running()?;
        py.allow_threads(|| engine.stop());
        Ok(())
    }

    /// Wait up to `timeout_s` seconds (forever if None); True once the run has finished.
    #[pyo3(signature = (timeout_s=None))]
    fn wait(&self, py: Python<'_>, timeout_s: Option<f64>) -> PyResult<bool> {
        let engine = self.running()?;
        let timeout = timeout_s.map(|s| Duration::from_secs_f64(s.max(0.0)));
        Ok(py.allow_threads(|| engine.wait(timeout)))
    }

    /// The result of the window since the start or the last cut, while the shard keeps running
    /// (a shard of `while_others` groups only: a baseload kept across a sweep's steps).
    fn cut(&self, py: Python<'_>) -> PyResult<ShardResult> {
        let engine = self.running()?;
        py.allow_threads(|| engine.cut())
            .map(|inner| ShardResult { inner })
            .map_err(engine_err)
    }

    /// The result, once the run has finished.
    fn result(&self) -> PyResult<ShardResult> {
        let engine = self.running()?;
        engine
            .result()
            .map(|inner| ShardResult { inner })
            .ok_or_else(|| PyRuntimeError::new_err("the run has not finished (or its result was already taken)"))
    }
}

/// A shard's measured result: mergeable, serializable, summarizable.
#[pyclass(module = "knee._engine")]
pub struct ShardResult {
    inner: core::ShardResult,
}

#[pymethods]
impl ShardResult {
    /// Lossless bytes (histograms in HdrHistogram V2 deflate encoding).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new_bound(py, &self.inner.to_bytes())
    }

    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        core::ShardResult::from_bytes(data)
            .map(|inner| Self { inner })
            .map_err(|e| DecodeError::new_err(e.to_string()))
    }

    /// Add another shard's result into this one (groups matched by name), its series placed by its start: `lag_s`
    /// seconds after this one's, on one clock (None: they started together, interval by interval).
    #[pyo3(signature = (other, lag_s=None))]
    fn merge(&mut self, other: PyRef<'_, ShardResult>, lag_s: Option<f64>) -> PyResult<()> {
        let merged = match lag_s {
            Some(lag) => self.inner.merge_at(&other.inner, lag),
            None => self.inner.merge(&other.inner),
        };
        merged.map_err(|e| MergeError::new_err(e.to_string()))
    }

    /// Append the next window of the same shard (a cut, or the rest at its end): counts and histograms add,
    /// the series goes on, the elapsed times add.
    fn follow(&mut self, later: PyRef<'_, ShardResult>) -> PyResult<()> {
        self.inner
            .follow(&later.inner)
            .map_err(|e| MergeError::new_err(e.to_string()))
    }

    /// Unix time of its start (a cut window's opening; merged, the earliest).
    #[getter]
    fn started_unix(&self) -> f64 {
        self.inner.span.started_unix
    }

    /// The summary as JSON (see docs/engine-spec.md).
    fn summary(&self) -> String {
        self.inner.summary_json()
    }

    /// A group's histogram (`latency`, `failed_latency`, `connect`, `ttfb`, `processing` or
    /// `latency_uncorrected`) in V2 deflate encoding, or None.
    fn histogram<'py>(&self, py: Python<'py>, group: usize, metric: &str) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let Some(metric) = core::Metric::from_name(metric) else {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "metric must be one of latency, failed_latency, connect, ttfb, processing, latency_uncorrected \
                 (got {metric:?})"
            )));
        };
        Ok(self
            .inner
            .histogram_v2(group, metric)
            .map(|b| PyBytes::new_bound(py, &b)))
    }
}

/// Parse and validate a spec and write it back with every field (defaults filled in): the engine's
/// own reading of it, so a test can hold Python's spec model against the engine's field by field.
#[pyfunction]
fn check_spec(spec_json: &str) -> PyResult<String> {
    let spec = core::Spec::from_json(spec_json).map_err(spec_err)?;
    serde_json::to_string(&spec).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Engine>()?;
    m.add_class::<ShardResult>()?;
    m.add_function(wrap_pyfunction!(check_spec, m)?)?;
    let py = m.py();
    for (name, ty) in [
        ("EngineError", py.get_type_bound::<EngineError>()),
        ("SpecError", py.get_type_bound::<SpecError>()),
        ("ResolveError", py.get_type_bound::<ResolveError>()),
        ("BodyFileError", py.get_type_bound::<BodyFileError>()),
        ("TlsError", py.get_type_bound::<TlsError>()),
        ("FdLimitError", py.get_type_bound::<FdLimitError>()),
        ("ThreadError", py.get_type_bound::<ThreadError>()),
        ("CutError", py.get_type_bound::<CutError>()),
        ("WorkerError", py.get_type_bound::<WorkerError>()),
        ("DecodeError", py.get_type_bound::<DecodeError>()),
        ("MergeError", py.get_type_bound::<MergeError>()),
    ] {
        m.add(name, ty)?;
    }
    Ok(())
}

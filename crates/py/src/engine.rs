//! `knee._engine.Engine` and `ShardResult`: conversion and GIL handling only.

// pyo3 0.22's #[pymethods] expansion trips this lint on every PyResult return.
#![allow(clippy::useless_conversion)]

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use knee_engine as core;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

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
        let spec = core::Spec::from_json(spec_json).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Self {
            spec: Mutex::new(Some(spec)),
            running: OnceLock::new(),
        })
    }

    /// Start the worker threads and return at once.
    fn start(&self, py: Python<'_>) -> PyResult<()> {
        let spec = self
            .spec
            .lock()
            .map_err(|_| PyRuntimeError::new_err("engine state poisoned"))?
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("the engine was already started"))?;
        let engine = py
            .allow_threads(|| core::Engine::start(spec))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
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
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Add another shard's result into this one (groups matched by name).
    fn merge(&mut self, other: PyRef<'_, ShardResult>) -> PyResult<()> {
        self.inner
            .merge(&other.inner)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The summary as JSON (see docs/engine-spec.md).
    fn summary(&self) -> String {
        self.inner.summary_json()
    }

    /// A group's histogram (`latency`, `connect`, `ttfb` or `latency_uncorrected`) in V2 deflate encoding, or None.
    fn histogram<'py>(&self, py: Python<'py>, group: usize, metric: &str) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let metric = match metric {
            "latency" => core::Metric::Latency,
            "connect" => core::Metric::Connect,
            "ttfb" => core::Metric::Ttfb,
            "processing" => core::Metric::Processing,
            "latency_uncorrected" => core::Metric::Uncorrected,
            other => {
                return Err(PyValueError::new_err(format!(
                    "metric must be one of latency, connect, ttfb, processing, latency_uncorrected (got {other:?})"
                )))
            }
        };
        Ok(self
            .inner
            .histogram_v2(group, metric)
            .map(|b| PyBytes::new_bound(py, &b)))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Engine>()?;
    m.add_class::<ShardResult>()?;
    Ok(())
}

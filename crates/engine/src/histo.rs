//! HdrHistogram helpers: the one shape every histogram has, V2 encoding, summary stats.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

/// Highest trackable value: one hour in microseconds.
pub const HIGHEST_US: u64 = 3_600_000_000;

/// A histogram of microseconds, 1 µs … 1 h, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_US, 3).expect("constant histogram bounds are valid")
}

/// A histogram of microseconds, 1 µs … 1 h, 2 significant digits (±1 %): a request mix's per-request latency,
/// about 26 KB where the 3 digits of `new_histogram` take 190 KB (a mix of 1 000 targets files' requests).
pub fn new_coarse() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_US, 2).expect("constant histogram bounds are valid")
}

/// Record a duration in microseconds (clamped to the trackable range).
#[inline]
pub fn record(h: &mut Histogram<u64>, d: std::time::Duration) {
    h.saturating_record(d.as_micros().min(u128::from(HIGHEST_US)) as u64);
}

/// V2 encoding with deflate.
pub fn encode_v2(h: &Histogram<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut out)
        .expect("serializing to a Vec cannot fail");
    out
}

/// Base64 of the V2 deflate encoding.
pub fn encode_b64(h: &Histogram<u64>) -> String {
    base64::engine::general_purpose::STANDARD.encode(encode_v2(h))
}

/// Inverse of `encode_b64`.
pub fn decode_b64(s: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| e.to_string())?;
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .map_err(|e| format!("{e:?}"))?;
    // Keep the canonical bounds so later merges and encodings are identical to a fresh recording, in the shape it
    // was recorded in: a request's 2-digit histogram added into a 3-digit one put each count at its coarse bucket's
    // lowest value (every per-request percentile of a decoded result up to 0.8 % low, and 7x its memory).
    let mut out = if h.sigfig() == new_coarse().sigfig() {
        new_coarse()
    } else {
        new_histogram()
    };
    out.add(&h).map_err(|e| format!("{e:?}"))?;
    Ok(out)
}

/// The percentiles of the summary's `percentiles` table.
pub const TABLE: [f64; 11] = [50.0, 66.0, 75.0, 80.0, 90.0, 95.0, 98.0, 99.0, 99.9, 99.99, 100.0];

/// 99.9 / 100.0 is 0.9990000000000001 in binary floating point, one count past the 99.9th
/// percentile; go through millionths so the table agrees with `p999` (Java's HdrHistogram steps
/// back with `nextAfter` for the same reason).
fn percent_to_quantile(percent: f64) -> f64 {
    (percent * 10_000.0).round() / 1_000_000.0
}

/// `[(50.0, p50), (66.0, p66), …, (100.0, max)]`; empty when nothing was recorded.
pub fn table(h: &Histogram<u64>) -> Vec<(f64, u64)> {
    if h.is_empty() {
        return Vec::new();
    }
    TABLE
        .iter()
        .map(|p| (*p, h.value_at_quantile(percent_to_quantile(*p))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_quantiles_are_exact_decimals() {
        assert!((percent_to_quantile(99.9) - 0.999).abs() < f64::EPSILON);
        assert!((percent_to_quantile(66.0) - 0.66).abs() < f64::EPSILON);
        let mut h = new_histogram();
        for v in 1..=5000u64 {
            h.record(v).unwrap();
        }
        let t = table(&h);
        let row = t.iter().find(|r| r.0 == 99.9).unwrap();
        assert_eq!(row.1, h.value_at_quantile(0.999));
        assert!((percent_to_quantile(99.99) - 0.9999).abs() < f64::EPSILON);
    }

    #[test]
    fn b64_round_trip_is_exact() {
        let mut h = new_histogram();
        for v in [1u64, 7, 300, 20_000, 20_001, 3_000_000, HIGHEST_US] {
            h.saturating_record(v);
        }
        let back = decode_b64(&encode_b64(&h)).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.len(), 7);
        assert_eq!(encode_v2(&back), encode_v2(&h));
    }

    #[test]
    fn a_coarse_histogram_round_trips_as_coarse() {
        // a request mix's per-request histogram: decoded into 3 digits, 12 345 µs came back as its bucket's lowest
        let mut h = new_coarse();
        for v in [12_345u64, 12_345, 99_999, 1] {
            h.saturating_record(v);
        }
        let back = decode_b64(&encode_b64(&h)).unwrap();
        assert_eq!(back.sigfig(), 2);
        assert_eq!(back, h);
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
        assert_eq!(back.max(), h.max());
        assert_eq!(encode_v2(&back), encode_v2(&h));
    }
}

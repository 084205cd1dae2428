//! `/debug/pprof/*`: CPU profiles in the gzip'd protobuf format `go tool
//! pprof` reads. The sampler (SIGPROF, via pprof-rs) runs only while a
//! profile request is being answered, and one at a time.

use std::{
    io::Write,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use flate2::{write::GzEncoder, Compression};
use http::{header, HeaderValue, Response, StatusCode};
use pprof::protos::Message;
use sitegrid_apimachinery::Status;

use crate::http::{
    response::{full, status, typed},
    Body,
};

/// Profile length when `seconds` is not given (as Go's net/http/pprof).
const DEFAULT_SECONDS: u64 = 30;
/// The longest profile one request may ask for.
const MAX_SECONDS: u64 = 300;
/// Samples per second; Go's default.
const FREQUENCY: i32 = 100;

/// Set while a CPU profile runs: the sampler is process-wide, so a second
/// request is refused rather than queued.
static PROFILING: AtomicBool = AtomicBool::new(false);

/// Why a profile could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The sampler could not be started (signal handler or timer).
    #[error("starting the CPU profiler")]
    Start(#[source] pprof::Error),
    /// The samples could not be collected into a report.
    #[error("building the profile report")]
    Report(#[source] pprof::Error),
    /// Compressing the profile failed.
    #[error("compressing the profile")]
    Gzip(#[source] std::io::Error),
    /// The blocking task building the report died.
    #[error("building the profile report")]
    Task(#[source] tokio::task::JoinError),
}

/// Clears [`PROFILING`] however the request ends (a client that hangs up
/// drops the request future, and with it the sampler and this guard).
struct Exclusive;

impl Exclusive {
    fn acquire() -> Option<Exclusive> {
        PROFILING
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| Exclusive)
    }
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        PROFILING.store(false, Ordering::Release);
    }
}

/// `GET /debug/pprof/profile?seconds=N`.
pub async fn cpu(query: Option<&str>) -> Response<Body> {
    let seconds = match parse_seconds(query) {
        Ok(s) => s,
        Err(s) => return status(&s),
    };
    let Some(_exclusive) = Exclusive::acquire() else {
        return status(&Status::failure(
            409,
            Some("Conflict"),
            "a CPU profile is already being taken; retry when it is done",
        ));
    };
    match cpu_profile(Duration::from_secs(seconds)).await {
        Ok(gz) => {
            let mut resp = typed(StatusCode::OK, "application/octet-stream", full(gz));
            let h = resp.headers_mut();
            h.insert(
                header::CONTENT_DISPOSITION,
                HeaderValue::from_static("attachment; filename=\"profile\""),
            );
            h.insert(
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            );
            resp
        }
        Err(e) => {
            tracing::warn!(error = %e, cause = ?std::error::Error::source(&e), "CPU profile failed");
            status(&Status::internal_error(format!(
                "{e}: {}",
                std::error::Error::source(&e).map_or_else(String::new, ToString::to_string)
            )))
        }
    }
}

/// `GET /debug/pprof/heap`: not available, and the answer says why.
pub fn heap() -> Response<Body> {
    status(&Status::failure(
        501,
        Some("NotImplemented"),
        "heap profiles need an allocator that records allocation stacks (jemalloc built \
         with profiling); this proxy uses the system allocator. Use /debug/pprof/profile \
         for CPU and /debug/cache or /metrics for cache sizes",
    ))
}

/// `seconds` from the query: absent → 30; otherwise an integer in 1..=300.
fn parse_seconds(query: Option<&str>) -> Result<u64, Status> {
    let raw = query.and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "seconds")
            .map(|(_, v)| v.into_owned())
    });
    let Some(raw) = raw else {
        return Ok(DEFAULT_SECONDS);
    };
    match raw.parse::<u64>() {
        Ok(s) if (1..=MAX_SECONDS).contains(&s) => Ok(s),
        _ => Err(Status::bad_request(format!(
            "seconds must be a whole number from 1 to {MAX_SECONDS}, got {raw:?}"
        ))),
    }
}

/// Samples the whole process for `length` and returns the gzip'd profile.
async fn cpu_profile(length: Duration) -> Result<Vec<u8>, ProfileError> {
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(FREQUENCY)
        // Unwinding through these from a signal handler can deadlock (pprof-rs docs).
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()
        .map_err(ProfileError::Start)?;
    tokio::time::sleep(length).await;
    // Symbolising and encoding take CPU for a while: off the async workers.
    tokio::task::spawn_blocking(move || {
        let report = guard
            .report()
            .frames_post_processor(strip_sampler_frames)
            .build()
            .map_err(ProfileError::Report)?;
        // Stop sampling before encoding, so the encoder does not profile itself.
        drop(guard);
        let profile = report.pprof().map_err(ProfileError::Report)?;
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(&profile.encode_to_vec())
            .map_err(ProfileError::Gzip)?;
        gz.finish().map_err(ProfileError::Gzip)
    })
    .await
    .map_err(ProfileError::Task)?
}

/// Drops the sampler's own frames (the unwinder, called from the signal
/// handler) from the top of a stack. pprof-rs removes the handler frame but
/// not the unwinder above it, which would otherwise be the leaf of every
/// sample and own all the "flat" time in `go tool pprof -top`.
fn strip_sampler_frames(frames: &mut pprof::Frames) {
    let is_sampler = |name: &str| {
        name.starts_with("backtrace::")
            || name.starts_with("pprof::")
            || name.starts_with("<pprof::")
    };
    let own = frames
        .frames
        .iter()
        .take_while(|symbols| symbols.iter().any(|s| is_sampler(&s.name())))
        .count();
    frames.frames.drain(..own);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds(None).unwrap(), 30);
        assert_eq!(parse_seconds(Some("debug=1")).unwrap(), 30);
        assert_eq!(parse_seconds(Some("seconds=5")).unwrap(), 5);
        assert_eq!(parse_seconds(Some("seconds=300")).unwrap(), 300);
        for bad in [
            "seconds=abc",
            "seconds=0",
            "seconds=301",
            "seconds=-1",
            "seconds=",
        ] {
            assert_eq!(parse_seconds(Some(bad)).unwrap_err().code, 400, "{bad}");
        }
    }
}

//! tracing subscriber set-up: human-readable or one-JSON-object-per-line logs on stderr.
//!
//! stdout carries only the product (dry-run YAML, summaries, JSON results); every log line goes
//! to stderr. The JSON form keeps the reference's shape: `time`, `level`, `msg`, then the event's
//! fields in call order (`{"time":"…","level":"INFO","msg":"vm created","vm_name":"…"}`), so
//! scripts that grep `"vms_deleted":1` keep working. `--verbose` lowers virtwork's own level to
//! DEBUG; other crates stay at INFO so kube/hyper internals do not flood the output. While
//! the live progress view is drawn ([`print_above`]), log lines print above it.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;

use crate::model::LogFormat;

/// Installs the global subscriber writing to stderr; `ansi`: colour the text format (see
/// `--color`). Later calls are ignored.
pub fn init(format: LogFormat, verbose: bool, ansi: bool) {
    let subscriber = subscriber(format, verbose, || AboveProgress, ansi);
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// The live progress view log lines must not tear, while it is drawn.
static PROGRESS_BAR: std::sync::Mutex<Option<indicatif::ProgressBar>> = std::sync::Mutex::new(None);

/// Registers (`Some`) or removes (`None`) the live progress view: while one is registered,
/// each log line is printed above it (the view is cleared, the line written, the view
/// redrawn) instead of through it.
pub fn print_above(bar: Option<indicatif::ProgressBar>) {
    *PROGRESS_BAR.lock().unwrap_or_else(|e| e.into_inner()) = bar;
}

/// stderr, suspending the live progress view around each write. The fmt layer writes one
/// whole formatted event per `write`, so a line is never split by a redraw.
struct AboveProgress;

impl std::io::Write for AboveProgress {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let bar = PROGRESS_BAR
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match bar {
            Some(bar) => bar.suspend(|| std::io::stderr().write_all(buf))?,
            None => std::io::stderr().write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// A subscriber in the given format writing to `writer` (tests pass a buffer).
pub fn subscriber<W>(
    format: LogFormat,
    verbose: bool,
    writer: W,
    ansi: bool,
) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let own_level = if verbose { Level::DEBUG } else { Level::INFO };
    // kube's HTTP trace layer logs every failed request at ERROR ("failed with error ...");
    // virtwork retries those and reports what matters itself, so they only show with --verbose.
    let kube_level = if verbose {
        LevelFilter::DEBUG
    } else {
        LevelFilter::OFF
    };
    let filter = Targets::new()
        .with_default(Level::INFO)
        .with_target(env!("CARGO_CRATE_NAME"), own_level)
        .with_target("kube_client", kube_level);
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Text => Box::new(
            registry.with(
                tracing_subscriber::fmt::layer()
                    .with_writer(writer)
                    .with_target(false)
                    .with_ansi(ansi),
            ),
        ),
        LogFormat::Json => Box::new(
            registry.with(
                tracing_subscriber::fmt::layer()
                    .with_writer(writer)
                    .event_format(JsonLines),
            ),
        ),
    }
}

/// One JSON object per event: `time` (RFC 3339, UTC), `level`, `msg`, then the fields.
struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = JsonFields::default();
        event.record(&mut fields);
        let level = match *event.metadata().level() {
            Level::TRACE => "TRACE",
            Level::DEBUG => "DEBUG",
            Level::INFO => "INFO",
            Level::WARN => "WARN",
            Level::ERROR => "ERROR",
        };
        // Built by hand to keep the reference's key order: time, level, msg, then the fields
        // in call order (serde_json maps would sort them).
        let json = |text: &str| serde_json::Value::from(text).to_string();
        let mut line = format!(
            "{{\"time\":{},\"level\":{},\"msg\":{}",
            json(&jiff::Timestamp::now().to_string()),
            json(level),
            json(&fields.message.unwrap_or_default()),
        );
        for (name, value) in fields.values {
            line.push(',');
            line.push_str(&serde_json::Value::String(name).to_string());
            line.push(':');
            line.push_str(&value.to_string());
        }
        line.push('}');
        writeln!(writer, "{line}")
    }
}

#[derive(Default)]
struct JsonFields {
    message: Option<String>,
    values: Vec<(String, serde_json::Value)>,
}

impl JsonFields {
    fn push(&mut self, field: &Field, value: serde_json::Value) {
        if field.name() == "message" {
            self.message = Some(match value {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            });
        } else {
            self.values.push((field.name().to_string(), value));
        }
    }
}

impl Visit for JsonFields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, serde_json::json!(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push(field, value.to_string().into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'w self) -> Buffer {
            self.clone()
        }
    }

    fn capture(format: LogFormat, verbose: bool, emit: impl FnOnce()) -> String {
        let buffer = Buffer::default();
        let subscriber = subscriber(format, verbose, buffer.clone(), false);
        tracing::subscriber::with_default(subscriber, emit);
        String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn json_lines_carry_reference_names_in_call_order() {
        let out = capture(LogFormat::Json, false, || {
            tracing::info!(vm_name = "virtwork-cpu-0", namespace = "ns", "vm created");
            tracing::info!(vms_deleted = 2_u64, dry_run = false, "cleanup complete");
        });
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        let first: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(first["level"], "INFO");
        assert_eq!(first["msg"], "vm created");
        assert_eq!(first["vm_name"], "virtwork-cpu-0");
        assert!(lines[0].find("\"vm_name\"").unwrap() < lines[0].find("\"namespace\"").unwrap());
        assert!(lines[1].contains("\"vms_deleted\":2"), "{}", lines[1]);
        assert!(first["time"].as_str().unwrap().ends_with('Z'));
        assert!(lines[0].starts_with("{\"time\":"), "{}", lines[0]);
        assert!(lines[0].find("\"level\"").unwrap() < lines[0].find("\"msg\"").unwrap());
    }

    #[test]
    fn verbose_enables_debug() {
        let quiet = capture(LogFormat::Json, false, || tracing::debug!("hidden detail"));
        assert!(quiet.is_empty(), "{quiet}");
        let loud = capture(LogFormat::Json, true, || tracing::debug!("shown detail"));
        assert!(loud.contains("\"level\":\"DEBUG\""), "{loud}");
    }

    #[test]
    fn text_format_is_readable() {
        let out = capture(LogFormat::Text, false, || {
            tracing::warn!(error = "boom", "cleanup warning")
        });
        assert!(out.contains("WARN"), "{out}");
        assert!(out.contains("cleanup warning"), "{out}");
        assert!(out.contains("boom"), "{out}");
        assert!(!out.contains("\"msg\""), "text format is not JSON: {out}");
    }
}

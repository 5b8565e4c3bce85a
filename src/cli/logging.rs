//! Logging setup shared by every subcommand. Logs go to stderr so stdout stays machine-readable.
//!
//! Log lines carry text from outside: a vCenter's fault strings, a tenant-named server's
//! replies, object names and annotations. A CR/LF in such text would start a line that looks
//! like the provider's own, and an ESC sequence would drive the terminal of whoever reads the
//! log. So no format writes a control character from a field: the text format escapes them
//! ([`EscapedFields`]); in JSON the encoder escapes C0 controls, and [`EscapingJson`] the rest
//! (DEL, C1 controls such as the one-byte CSI, bidirectional overrides).
use std::fmt::{self, Write as _};
use std::io::IsTerminal;

use super::out::errln;
use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FormatFields, MakeWriter};
use tracing_subscriber::util::SubscriberInitExt;

#[derive(clap::Args, Debug)]
pub struct LogArgs {
    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `vsphere_provider=debug`.
    /// Default: `info` for `run` (a controller should say what it does), `warn` for the tools.
    #[arg(long, global = true, env = "VSPHERE_PROVIDER_LOG")]
    pub log_level: Option<String>,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// Install the subscriber; `default_level` applies when no level was given.
pub fn init(args: &LogArgs, default_level: &str) {
    let level = args.log_level.as_deref().unwrap_or(default_level);
    let filter = EnvFilter::try_new(level).unwrap_or_else(|e| {
        errln!("warning: invalid --log-level {level:?} ({e}); using {default_level}");
        EnvFilter::new(default_level)
    });
    // Colours only for a person at a terminal: in a pod's log they are noise.
    let ansi = std::io::stderr().is_terminal();
    // `try_init` also forwards what libraries log through the `log` crate (rustls).
    let _ = subscriber(args.log_format, filter, ansi, std::io::stderr).try_init();
}

/// The subscriber of `format`, writing to `writer`.
pub fn subscriber<W>(
    format: LogFormat,
    filter: EnvFilter,
    ansi: bool,
    writer: W,
) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi);
    match format {
        LogFormat::Text => Box::new(
            builder
                .with_writer(writer)
                .fmt_fields(EscapedFields)
                .finish(),
        ),
        LogFormat::Json => Box::new(builder.with_writer(EscapingJson(writer)).json().finish()),
    }
}

/// Writes JSON log lines with every character [`must_escape`] names that the JSON encoder
/// leaves as it is written as a `\uXXXX` escape: the same string to a JSON reader, and nothing
/// a terminal acts on. (The encoder escapes C0 controls itself; outside strings a JSON line
/// holds none of these characters, and its final newline is kept.)
pub struct EscapingJson<M>(pub M);

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for EscapingJson<M> {
    type Writer = EscapingJsonWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        EscapingJsonWriter(self.0.make_writer())
    }
}

/// The writer of [`EscapingJson`]. The formatter hands it each event whole, in one write.
pub struct EscapingJsonWriter<W>(W);

impl<W: std::io::Write> std::io::Write for EscapingJsonWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let escape = |c: char| c != '\n' && must_escape(c);
        match std::str::from_utf8(buf) {
            Ok(text) if text.chars().any(escape) => {
                let mut out = String::with_capacity(text.len() + 16);
                for c in text.chars() {
                    if escape(c) {
                        // Every such character is in the Basic Multilingual Plane: one escape.
                        let _ = write!(out, "\\u{:04x}", c as u32);
                    } else {
                        out.push(c);
                    }
                }
                self.0.write_all(out.as_bytes())?;
            }
            _ => self.0.write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// The text format's fields (the message, then `name=value`, space-separated, as the default
/// formatter writes them) with every control character escaped: `\r`, `\n`, `\t`, and `\u{..}`
/// for the others, including the bidirectional overrides and line separators that reorder or
/// break a line without being control characters.
pub struct EscapedFields;

impl<'w> FormatFields<'w> for EscapedFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut visitor = EscapingVisitor {
            writer: &mut writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct EscapingVisitor<'a, 'w> {
    writer: &'a mut Writer<'w>,
    first: bool,
    result: fmt::Result,
}

impl EscapingVisitor<'_, '_> {
    fn write(&mut self, field: &Field, value: fmt::Arguments<'_>) {
        if self.result.is_err() {
            return;
        }
        // Metadata of events from the `log` crate; the formatter shows it as the target.
        if field.name().starts_with("log.") {
            return;
        }
        let mut text = String::new();
        if field.name() != "message" {
            text.push_str(field.name());
            text.push('=');
        }
        if text.write_fmt(value).is_err() {
            self.result = Err(fmt::Error);
            return;
        }
        if !self.first {
            self.result = self.writer.write_char(' ');
        }
        self.first = false;
        if self.result.is_ok() {
            self.result = write_escaped(self.writer, &text);
        }
    }
}

impl Visit for EscapingVisitor<'_, '_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.write(field, format_args!("{value}"));
        } else {
            self.write(field, format_args!("{value:?}"));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.write(field, format_args!("{value:?}"));
    }
}

/// Whether `c` must not reach a log line as it is.
fn must_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with the characters [`must_escape`] names escaped.
fn write_escaped(out: &mut impl fmt::Write, text: &str) -> fmt::Result {
    for c in text.chars() {
        match c {
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            c if must_escape(c) => write!(out, "\\u{{{:x}}}", c as u32)?,
            c => out.write_char(c)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer that keeps what it was given.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Captured {
        type Writer = Captured;
        fn make_writer(&'w self) -> Captured {
            self.clone()
        }
    }

    /// What a server could send: a line break forging a second log line, and an ESC sequence
    /// that clears the reader's terminal.
    const HOSTILE: &str = "fault\r\nERROR forged line\u{1b}[2J\u{9b}1m\u{202e}";

    fn logged(format: LogFormat, ansi: bool) -> String {
        let out = Captured::default();
        let subscriber = subscriber(format, EnvFilter::new("info"), ansi, out.clone());
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("sweep", server = %HOSTILE);
            let _in = span.enter();
            tracing::warn!(error = %HOSTILE, quoted = HOSTILE, "login failed: {HOSTILE}");
        });
        String::from_utf8(out.0.lock().unwrap().clone()).unwrap()
    }

    fn assert_one_clean_line(line: &str) {
        assert_eq!(line.matches('\n').count(), 1, "one line: {line:?}");
        assert!(line.ends_with('\n'), "{line:?}");
        assert!(!line.contains('\r'), "{line:?}");
        assert!(!line.contains("\u{1b}[2J"), "{line:?}");
        assert!(!line.contains('\u{202e}'), "{line:?}");
        assert!(!line.contains('\u{9b}'), "{line:?}");
    }

    #[test]
    fn text_logs_escape_control_characters_in_every_field() {
        for ansi in [false, true] {
            let line = logged(LogFormat::Text, ansi);
            assert_one_clean_line(&line);
            let escaped = r"fault\r\nERROR forged line\u{1b}[2J\u{9b}1m\u{202e}";
            assert!(line.contains(&format!("login failed: {escaped}")), "{line}");
            assert!(line.contains(&format!("error={escaped}")), "{line}");
            assert!(line.contains(&format!("server={escaped}")), "{line}");
            assert!(
                line.contains(r#"quoted="fault\r\nERROR forged line\u{1b}[2J\u{9b}1m\u{202e}""#),
                "{line}"
            );
        }
    }

    #[test]
    fn json_logs_escape_control_characters_in_every_field() {
        let line = logged(LogFormat::Json, false);
        assert_one_clean_line(&line);
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            value["fields"]["message"],
            format!("login failed: {HOSTILE}")
        );
        assert_eq!(value["fields"]["error"], HOSTILE);
        assert_eq!(value["span"]["server"], HOSTILE);
    }
}

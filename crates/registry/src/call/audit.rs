//! The audit log: one JSON line per call, appended so that concurrent writers never interleave.
//!
//! A line reads
//! `{"time":"2025-01-02T03:04:05.678Z","tool":"hello","arguments_sha256":"…","outcome":"ok","duration_ms":41,"exit_code":0,"signal":null,"backend":"cgroup","call_id":"…"}`.
//! A call that received secrets also has `"secrets":["GITHUB_TOKEN"]`: their names, never their
//! values.
//! `call_id` is the id the tool received as `TOOLSMITH_CALL_ID` (see [`CallIdentity`](crate::call::identity::CallIdentity)), so a
//! tool's own log lines can be matched with the audit's.
//! `outcome` is `ok`, the envelope's error code, or what ended a call that has no envelope
//! (`cancelled`, `client_gone`, `killed_at_shutdown`, a refusal, ...); `exit_code`, `signal` and `backend` are `null`
//! when no process ran. The digest is of the arguments' canonical JSON (object keys sorted at
//! every level, no whitespace), so equal arguments written in another key order digest alike,
//! and the log never holds the arguments themselves, which may be secret.
//!
//! The file is opened with `O_APPEND` and each line goes out in one `write(2)`: the kernel appends
//! it whole, so several toolsmith processes can share one log. A line the disk has no room for
//! is an error, and the part of it that was written is cut off again, so every line of the log
//! stays a whole record.

use std::fs::File;
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::call::identity::Id;
use crate::envelope::{Body, Envelope};
use crate::regular_file::{Links, open_append_regular};

/// Why the audit log could not be written.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The file could not be opened for appending.
    #[error("cannot open audit log {path}", path = path.display())]
    Open {
        /// The log file.
        path: PathBuf,
        /// The IO failure.
        #[source]
        source: std::io::Error,
    },
    /// A line could not be written.
    #[error("cannot write to audit log {path}", path = path.display())]
    Write {
        /// The log file.
        path: PathBuf,
        /// The IO failure.
        #[source]
        source: std::io::Error,
    },
    /// Only part of a line was written (a full disk or a file size limit).
    #[error("wrote only {written} of {len} bytes of a line to audit log {path}", path = path.display())]
    ShortWrite {
        /// The log file.
        path: PathBuf,
        /// Bytes written.
        written: usize,
        /// Bytes in the line.
        len: usize,
    },
}

/// An audit log file, open for appending.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: File,
}

impl AuditLog {
    /// Opens (creating it if needed) the log at `path` for appending.
    pub fn open(path: &Path) -> Result<AuditLog, AuditError> {
        // A FIFO, a device or a link out of its directory would block or swallow every
        // call's record: the log is a regular file or nothing.
        let file = open_append_regular(path, Links::WithinDirectory).map_err(|source| {
            AuditError::Open {
                path: path.to_path_buf(),
                source,
            }
        })?;
        Ok(AuditLog {
            path: path.to_path_buf(),
            file,
        })
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `record` as one line, in one `write`.
    pub fn append(&self, record: &AuditRecord) -> Result<(), AuditError> {
        self.append_json(&record.to_json())
    }

    /// Appends the line of a tool whose definition changed since it was last listed
    /// (`"event": "definition_changed"`, with the old and new digests).
    pub fn append_definition_change(
        &self,
        change: &crate::definitions::DefinitionChange,
    ) -> Result<(), AuditError> {
        self.append_json(&change.to_json())
    }

    fn append_json(&self, value: &Value) -> Result<(), AuditError> {
        let mut line = value.to_string().into_bytes();
        line.push(b'\n');
        let written = (&self.file)
            .write(&line)
            .map_err(|source| AuditError::Write {
                path: self.path.clone(),
                source,
            })?;
        if written != line.len() {
            self.cut_fragment(written);
            return Err(AuditError::ShortWrite {
                path: self.path.clone(),
                written,
                len: line.len(),
            });
        }
        Ok(())
    }
}

impl AuditLog {
    /// Removes the `written` bytes of a line that was cut short (a full disk), so that the
    /// next record, once there is room, starts a line of its own instead of being glued to a
    /// torn one and lost with it.
    ///
    /// After an `O_APPEND` write the file offset is the end of what that write appended. The
    /// fragment is cut only when it is still the end of the file: a record another process
    /// appended after it is never cut. (That check and the truncation are not one atomic step;
    /// a writer that appends in between, on a disk that just refused us, loses its record to
    /// the cut, which is far less likely than the torn line it prevents.)
    fn cut_fragment(&self, written: usize) {
        let Ok(fragment_end) = (&self.file).stream_position() else {
            return;
        };
        let Ok(metadata) = self.file.metadata() else {
            return;
        };
        let written = written as u64;
        if metadata.len() == fragment_end && fragment_end >= written {
            // Best effort: if the truncation fails too, the error already reported says a
            // record is missing.
            let _ignored = self.file.set_len(fragment_end - written);
        }
    }
}

/// One call as the audit log records it, from its start to its envelope: the one place where a
/// call is timed, turned into an [`AuditRecord`] and appended, whoever made the call (`toolsmith
/// run`, an MCP `tools/call`, a call policy refused).
#[derive(Debug)]
#[must_use = "a call is recorded only when finished"]
pub struct AuditedCall {
    tool: String,
    arguments: Value,
    client: Option<String>,
    call_id: Id,
    time: SystemTime,
    started: Instant,
}

impl AuditedCall {
    /// A call of `tool` (as the caller named it) with `arguments`, starting now; `client` is
    /// who asked, when a transport knows; `call_id` is the id the tool receives.
    pub fn start(
        tool: &str,
        arguments: &Value,
        client: Option<String>,
        call_id: &Id,
    ) -> AuditedCall {
        AuditedCall {
            tool: tool.to_owned(),
            arguments: arguments.clone(),
            client,
            call_id: call_id.clone(),
            time: SystemTime::now(),
            started: Instant::now(),
        }
    }

    /// How long the call has run so far.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The same call, recorded under `tool` (the name it resolved to, e.g. without the
    /// server's prefix).
    pub fn named(mut self, tool: &str) -> AuditedCall {
        tool.clone_into(&mut self.tool);
        self
    }

    /// Ends a call that has no envelope (it was cancelled, its client went away, the server
    /// killed it or refused it, or it was not a tool run) with `outcome`, and appends its
    /// line to `log`, if there is one; `exit_code`, `signal` and `backend` are `null`.
    pub fn finish_as(self, log: Option<&AuditLog>, outcome: &str) -> Result<(), AuditError> {
        let Some(log) = log else {
            return Ok(());
        };
        let record = AuditRecord {
            time: self.time,
            tool: self.tool,
            arguments_sha256: arguments_sha256(&self.arguments),
            outcome: outcome.to_owned(),
            duration: self.started.elapsed(),
            exit_code: None,
            signal: None,
            backend: None,
            client: self.client,
            call_id: Some(self.call_id.to_string()),
            secrets: Vec::new(),
            egress: Vec::new(),
            denied: Vec::new(),
        };
        log.append(&record)
    }

    /// Ends the call with `envelope` and appends its line to `log`, if there is one.
    pub fn finish(self, log: Option<&AuditLog>, envelope: &Envelope) -> Result<(), AuditError> {
        let Some(log) = log else {
            return Ok(());
        };
        let mut record = AuditRecord::new(
            &self.tool,
            &self.arguments,
            envelope,
            self.time,
            self.started.elapsed(),
        );
        record.client = self.client;
        record.call_id = Some(self.call_id.to_string());
        log.append(&record)
    }
}

/// What the audit log keeps of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// When the call started.
    pub time: SystemTime,
    /// The tool as the caller named it.
    pub tool: String,
    /// [`arguments_sha256`] of the arguments.
    pub arguments_sha256: String,
    /// `ok`, the envelope's error code, or what ended a call without an envelope
    /// ([`AuditedCall::finish_as`]: `cancelled`, `client_gone`, `killed_at_shutdown`, ...).
    pub outcome: String,
    /// How long the call took, from the start of the call to its envelope.
    pub duration: Duration,
    /// The tool's exit status, if it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
    /// The containment backend, if a process ran.
    pub backend: Option<String>,
    /// Who asked for the call, when a transport knows (`serve --http`: the peer
    /// address and whether it authenticated); not written when `None`.
    pub client: Option<String>,
    /// The id the tool received as `TOOLSMITH_CALL_ID`; not written when `None`.
    pub call_id: Option<String>,
    /// The names of the secrets the call received (`metadata.sandbox.secrets`), never their
    /// values; not written when empty.
    pub secrets: Vec<String>,
    /// Every connection the tool asked toolsmith's egress proxy for (destination, resolved
    /// address, bytes, verdict); not written when empty.
    pub egress: Vec<crate::call::egress::EgressRecord>,
    /// Every refusal of the call (`metadata.sandbox.denied`: what, why, the key that would
    /// grant it), reads of masked paths included; not written when empty.
    pub denied: Vec<crate::grant::SandboxDenial>,
}

impl AuditRecord {
    /// The record of a call to `tool` with `arguments` that started at
    /// `time`, took `duration` and returned `envelope`.
    pub fn new(
        tool: &str,
        arguments: &Value,
        envelope: &Envelope,
        time: SystemTime,
        duration: Duration,
    ) -> AuditRecord {
        AuditRecord {
            time,
            tool: tool.to_owned(),
            arguments_sha256: arguments_sha256(arguments),
            outcome: match &envelope.body {
                Body::Success { .. } => "ok".to_owned(),
                Body::Failure { error_code, .. } => error_code.as_str().to_owned(),
            },
            duration,
            exit_code: envelope.metadata.exit_code,
            signal: envelope.metadata.signal,
            backend: envelope.metadata.backend.clone(),
            client: None,
            call_id: None,
            secrets: envelope
                .metadata
                .sandbox
                .as_ref()
                .map(|sandbox| sandbox.secrets.clone())
                .unwrap_or_default(),
            egress: envelope
                .metadata
                .sandbox
                .as_ref()
                .map(|sandbox| sandbox.egress.clone())
                .unwrap_or_default(),
            denied: envelope
                .metadata
                .sandbox
                .as_ref()
                .map(|sandbox| sandbox.denied.clone())
                .unwrap_or_default(),
        }
    }

    /// The record as the JSON object of its line.
    pub fn to_json(&self) -> Value {
        let mut line = json!({
            "time": rfc3339_utc(self.time),
            "tool": self.tool,
            "arguments_sha256": self.arguments_sha256,
            "outcome": self.outcome,
            "duration_ms": u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
            "exit_code": self.exit_code,
            "signal": self.signal,
            "backend": self.backend,
        });
        if let (Some(client), Value::Object(fields)) = (&self.client, &mut line) {
            fields.insert("client".to_owned(), Value::from(client.as_str()));
        }
        if let (Some(call_id), Value::Object(fields)) = (&self.call_id, &mut line) {
            fields.insert("call_id".to_owned(), Value::from(call_id.as_str()));
        }
        if let (false, Value::Object(fields)) = (self.secrets.is_empty(), &mut line) {
            fields.insert("secrets".to_owned(), Value::from(self.secrets.clone()));
        }
        if let (false, Value::Object(fields)) = (self.egress.is_empty(), &mut line) {
            fields.insert("egress".to_owned(), json!(self.egress));
        }
        if let (false, Value::Object(fields)) = (self.denied.is_empty(), &mut line) {
            fields.insert("denied".to_owned(), json!(self.denied));
        }
        line
    }
}

/// The SHA-256 of the canonical JSON of `arguments`, in lowercase hex.
pub fn arguments_sha256(arguments: &Value) -> String {
    let mut canonical = String::new();
    write_canonical(arguments, &mut canonical);
    let digest = Sha256::digest(canonical.as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Writes `value` with object keys sorted at every level and no whitespace.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(object) => {
            let mut entries: Vec<(&String, &Value)> = object.iter().collect();
            entries.sort_by(|left, right| left.0.cmp(right.0));
            out.push('{');
            for (index, (key, field)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(field, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// `time` as RFC 3339 in UTC with milliseconds, e.g. `2025-01-02T03:04:05.678Z`.
pub(crate) fn rfc3339_utc(time: SystemTime) -> String {
    // Times before 1970 cannot come from the clock of a running call; they are shown as the epoch.
    let since_epoch = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = since_epoch.as_secs();
    let days = i64::try_from(seconds / 86_400).unwrap_or(i64::MAX / 2);
    let second_of_day = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60,
        since_epoch.subsec_millis()
    )
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    // Both are in range by construction: day in 1..=31, month in 1..=12.
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use serde_json::{Value, json};

    use crate::call::audit::{AuditLog, AuditRecord, AuditedCall, arguments_sha256, rfc3339_utc};
    use crate::envelope::{Envelope, ErrorCode, Metadata};

    fn check(envelope: Envelope, expect: Value) {
        let record = AuditRecord::new(
            "hello",
            &json!({"name": "Ada"}),
            &envelope,
            UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
            Duration::from_millis(41),
        );
        assert_eq!(record.to_json(), expect);
    }

    #[test]
    fn line_of_a_successful_call() {
        let mut metadata = Metadata::not_started();
        metadata.exit_code = Some(0);
        metadata.backend = Some("cgroup".to_owned());
        check(
            Envelope {
                body: crate::envelope::Body::Success { result: json!(1) },
                metadata,
            },
            json!({
                "time": "2023-11-14T22:13:20.123Z",
                "tool": "hello",
                "arguments_sha256": arguments_sha256(&json!({"name": "Ada"})),
                "outcome": "ok",
                "duration_ms": 41,
                "exit_code": 0,
                "signal": null,
                "backend": "cgroup"
            }),
        );
    }

    #[test]
    fn line_of_a_call_that_ran_nothing() {
        check(
            Envelope::failure(
                ErrorCode::PolicyDenied,
                "no".to_owned(),
                Metadata::not_started(),
            ),
            json!({
                "time": "2023-11-14T22:13:20.123Z",
                "tool": "hello",
                "arguments_sha256": arguments_sha256(&json!({"name": "Ada"})),
                "outcome": "POLICY_DENIED",
                "duration_ms": 41,
                "exit_code": null,
                "signal": null,
                "backend": null
            }),
        );
    }

    #[test]
    fn digest_ignores_key_order_and_whitespace() {
        let one: Value = serde_json::from_str(r#"{"b": [1, {"y": 2, "x": 1}], "a": "é"}"#).unwrap();
        let two: Value = serde_json::from_str(r#"{"a":"é","b":[1,{"x":1,"y":2}]}"#).unwrap();
        assert_eq!(arguments_sha256(&one), arguments_sha256(&two));
        assert_ne!(arguments_sha256(&one), arguments_sha256(&json!({"a": "e"})));
        // The SHA-256 of `{}`.
        assert_eq!(
            arguments_sha256(&json!({})),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339_utc(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00.000Z"
        );
        assert_eq!(
            rfc3339_utc(UNIX_EPOCH + Duration::from_millis(4_102_444_799_999)),
            "2099-12-31T23:59:59.999Z"
        );
        assert_eq!(
            rfc3339_utc(UNIX_EPOCH - Duration::from_secs(1)),
            "1970-01-01T00:00:00.000Z"
        );
    }

    #[test]
    fn an_audited_call_writes_one_line_naming_its_client_and_nothing_without_a_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        let envelope = Envelope::failure(
            ErrorCode::PolicyDenied,
            "Tool demo may not be called.".to_owned(),
            Metadata::not_started(),
        );
        let arguments = json!({"b": 1, "a": 2});
        let call_id = crate::call::identity::Id::random();
        let call = AuditedCall::start(
            "demo",
            &arguments,
            Some("127.0.0.1 (token)".to_owned()),
            &call_id,
        );
        call.finish(Some(&log), &envelope).unwrap();
        AuditedCall::start("demo", &arguments, None, &call_id)
            .finish(None, &envelope)
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert_eq!(lines[0]["tool"], "demo");
        assert_eq!(lines[0]["outcome"], "POLICY_DENIED");
        assert_eq!(lines[0]["client"], "127.0.0.1 (token)");
        assert_eq!(lines[0]["call_id"], call_id.as_str());
        assert_eq!(
            lines[0]["arguments_sha256"],
            arguments_sha256(&arguments).as_str()
        );
    }

    #[test]
    fn appends_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, "earlier\n").unwrap();
        let log = AuditLog::open(&path).unwrap();
        let record = AuditRecord::new(
            "hello",
            &json!({}),
            &Envelope::failure(
                ErrorCode::ToolNotFound,
                "x".to_owned(),
                Metadata::not_started(),
            ),
            SystemTime::now(),
            Duration::ZERO,
        );
        log.append(&record).unwrap();
        log.append(&record).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], "earlier");
        let parsed: Value = serde_json::from_str(lines[2]).unwrap();
        assert_eq!(parsed["outcome"], "TOOL_NOT_FOUND");
    }
}

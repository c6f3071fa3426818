//! The parent's ends of a run's pipes: the output streams read into bounded
//! captures, toolsmith's init's status record, the report lines and stdin.
//! Each read or write is one cancel-safe step of `run.rs`'s event loop.

use std::ffi::c_int;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::unistd::pipe2;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

use crate::Error;
use crate::capture::StreamCapture;
use crate::command::MAX_REPORT_LINE;
use crate::init::StatusRecord;

/// The size of one read from an output pipe.
const READ_CHUNK: usize = 64 * 1024;

/// An output pipe being read into a bounded capture.
pub(crate) struct Stream {
    pipe: Option<pipe::Receiver>,
    pub(crate) capture: StreamCapture,
    buffer: Box<[u8]>,
}

impl Stream {
    pub(crate) fn new(read_end: OwnedFd, cap: u64) -> Result<Stream, Error> {
        Ok(Stream {
            pipe: Some(receiver(read_end)?),
            capture: StreamCapture::new(cap),
            buffer: vec![0; READ_CHUNK].into_boxed_slice(),
        })
    }

    pub(crate) fn open(&self) -> bool {
        self.pipe.is_some()
    }

    /// Reads one chunk; closes the stream at EOF or on an error. Cancel-safe.
    pub(crate) async fn read_chunk(&mut self) {
        let Some(pipe) = &mut self.pipe else {
            return;
        };
        match pipe.read(&mut self.buffer).await {
            Ok(0) | Err(_) => self.pipe = None,
            Ok(read) => self.capture.push(&self.buffer[..read]),
        }
    }
}

/// The status pipe of toolsmith's init: the program's [`StatusRecord`], or
/// nothing when the init died without one (killed with the namespace).
pub(crate) struct InitStatus {
    pipe: Option<pipe::Receiver>,
    bytes: Vec<u8>,
}

impl InitStatus {
    /// Reads the record from the init's status pipe.
    pub(crate) fn new(status: OwnedFd) -> Result<InitStatus, Error> {
        Ok(InitStatus {
            pipe: Some(receiver(status)?),
            bytes: Vec::with_capacity(StatusRecord::SIZE),
        })
    }

    /// True once the record is whole or the pipe reached EOF.
    pub(crate) fn finished(&self) -> bool {
        self.pipe.is_none() || self.bytes.len() == StatusRecord::SIZE
    }

    /// Reads what is left of the record. Cancel-safe.
    pub(crate) async fn read_chunk(&mut self) {
        let Some(pipe) = &mut self.pipe else {
            return;
        };
        let mut buffer = [0_u8; StatusRecord::SIZE];
        let wanted = StatusRecord::SIZE - self.bytes.len();
        match pipe.read(&mut buffer[..wanted]).await {
            Ok(0) | Err(_) => self.pipe = None,
            Ok(read) => self.bytes.extend_from_slice(&buffer[..read]),
        }
    }

    /// Takes what the pipe holds without waiting, and closes it.
    pub(crate) fn drain(&mut self) {
        if let Some(pipe) = self.pipe.take() {
            let mut buffer = [0_u8; StatusRecord::SIZE];
            while self.bytes.len() < StatusRecord::SIZE {
                let wanted = StatusRecord::SIZE - self.bytes.len();
                match pipe.try_read(&mut buffer[..wanted]) {
                    Ok(read) if read > 0 => self.bytes.extend_from_slice(&buffer[..read]),
                    _ => break,
                }
            }
        }
    }

    pub(crate) fn record(&self) -> Option<StatusRecord> {
        StatusRecord::decode(&self.bytes)
    }
}

/// The report pipe (see [`Executor::run_reporting`](crate::Executor::run_reporting)): lines forwarded to the caller as they arrive.
pub(crate) struct Reports {
    pipe: Option<pipe::Receiver>,
    sink: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    line: Vec<u8>,
    /// The current line outgrew [`MAX_REPORT_LINE`]; it is dropped up to its newline.
    overlong: bool,
    buffer: Box<[u8]>,
}

impl Reports {
    pub(crate) fn new(
        read_end: OwnedFd,
        sink: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    ) -> Result<Reports, Error> {
        Ok(Reports {
            pipe: Some(receiver(read_end)?),
            sink,
            line: Vec::new(),
            overlong: false,
            buffer: vec![0; READ_CHUNK].into_boxed_slice(),
        })
    }

    pub(crate) fn open(&self) -> bool {
        self.pipe.is_some()
    }

    /// Reads one chunk and forwards the lines it completes. Cancel-safe.
    pub(crate) async fn read_chunk(&mut self) {
        let Some(pipe) = &mut self.pipe else {
            return;
        };
        let read = match pipe.read(&mut self.buffer).await {
            Ok(0) | Err(_) => {
                self.pipe = None;
                // A last line without its newline still counts.
                if !self.line.is_empty() && !self.overlong {
                    let _ignored = self.sink.send(std::mem::take(&mut self.line));
                }
                return;
            }
            Ok(read) => read,
        };
        for &byte in &self.buffer[..read] {
            if byte == b'\n' {
                if !self.overlong {
                    // A caller that stopped listening is not the program's failure.
                    let _ignored = self.sink.send(std::mem::take(&mut self.line));
                }
                self.line.clear();
                self.overlong = false;
            } else if self.line.len() < MAX_REPORT_LINE {
                self.line.push(byte);
            } else {
                self.overlong = true;
                self.line.clear();
            }
        }
    }
}

/// The parent's end of an output pipe, non-blocking and registered with the runtime.
pub(crate) fn receiver(read_end: OwnedFd) -> Result<pipe::Receiver, Error> {
    set_nonblocking(&read_end)?;
    pipe::Receiver::from_owned_fd_unchecked(read_end).map_err(|source| Error::Sys {
        call: "registering a pipe with the runtime",
        source,
    })
}

/// The input being written to the program's stdin.
pub(crate) struct Input<'input> {
    pipe: Option<pipe::Sender>,
    remaining: &'input [u8],
    pub(crate) unread: bool,
}

impl Input<'_> {
    /// The parent's end of the stdin pipe (none for `/dev/null`),
    /// non-blocking and registered with the runtime, and what to write to it.
    pub(crate) fn new(write_end: Option<OwnedFd>, bytes: &[u8]) -> Result<Input<'_>, Error> {
        let pipe = match write_end {
            Some(write_end) => {
                set_nonblocking(&write_end)?;
                Some(
                    pipe::Sender::from_owned_fd_unchecked(write_end).map_err(|source| {
                        Error::Sys {
                            call: "registering a pipe with the runtime",
                            source,
                        }
                    })?,
                )
            }
            None => None,
        };
        Ok(Input {
            pipe,
            remaining: bytes,
            unread: false,
        })
    }

    pub(crate) fn pending(&self) -> bool {
        self.pipe.is_some()
    }

    /// Writes one chunk; closes stdin when done. A program that exits or
    /// closes stdin without reading everything is not an error.
    pub(crate) async fn write_chunk(&mut self) {
        let Some(pipe) = &mut self.pipe else {
            return;
        };
        if self.remaining.is_empty() {
            self.pipe = None;
            return;
        }
        match pipe.write(self.remaining).await {
            Ok(written) => self.remaining = &self.remaining[written..],
            Err(error) => {
                if error.kind() != io::ErrorKind::BrokenPipe {
                    tracing::debug!(%error, "writing stdin failed");
                }
                self.unread = true;
                self.pipe = None;
            }
        }
    }

    pub(crate) fn close(&mut self) {
        if self.pipe.take().is_some() && !self.remaining.is_empty() {
            self.unread = true;
        }
    }
}

/// Creates a pipe whose both ends are close-on-exec and at least 3, so that
/// `dup2` onto 0, 1 and 2 in the child never clobbers another end. Returns
/// `(read, write)`.
pub(crate) fn pipe() -> Result<(OwnedFd, OwnedFd), Error> {
    let (read, write) = pipe2(OFlag::O_CLOEXEC).map_err(|errno| Error::Sys {
        call: "pipe2",
        source: io::Error::from(errno),
    })?;
    Ok((above_stdio(read)?, above_stdio(write)?))
}

/// Returns `fd` itself when it is 3 or above, else a close-on-exec duplicate that is.
pub(crate) fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, Error> {
    at_least(fd, 3)
}

/// Returns `fd` itself when it is `lowest` or above, else a close-on-exec duplicate that is.
pub(crate) fn at_least(fd: OwnedFd, lowest: c_int) -> Result<OwnedFd, Error> {
    if fd.as_raw_fd() >= lowest {
        return Ok(fd);
    }
    let duplicate = fcntl(&fd, FcntlArg::F_DUPFD_CLOEXEC(lowest)).map_err(|errno| Error::Sys {
        call: "fcntl(F_DUPFD_CLOEXEC)",
        source: io::Error::from(errno),
    })?;
    // SAFETY: fcntl returned a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(duplicate) })
}

/// Switches the parent's end of a pipe to non-blocking mode (the child's end
/// stays blocking, as programs expect).
pub(crate) fn set_nonblocking(fd: &OwnedFd) -> Result<(), Error> {
    fcntl(fd, FcntlArg::F_GETFL)
        .and_then(|flags| {
            let flags = OFlag::from_bits_retain(flags) | OFlag::O_NONBLOCK;
            fcntl(fd, FcntlArg::F_SETFL(flags))
        })
        .map(drop)
        .map_err(|errno| Error::Sys {
            call: "fcntl(O_NONBLOCK)",
            source: io::Error::from(errno),
        })
}

//! The proxy's relay: the bytes of one direction of a connection, moved
//! socket to socket through a pipe with `splice(2)`, so they never enter
//! toolsmith's memory (no user-space copy and no buffer per connection).
//! Where the kernel refuses `splice` for these descriptors (a seccomp policy,
//! an emulated kernel), the same loop copies through a small buffer instead.
//!
//! One direction reads only from `from` and writes only to `to`; both
//! directions of a connection run on shared references to the same two
//! streams, in the connection's one task.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::Interest;
use tokio::net::TcpStream;

/// The most one `splice` moves: what the pipe holds once enlarged (the
/// kernel's default pipe, 64 KiB, when it cannot be).
const PIPE_BYTES: usize = 1 << 20;
/// The copy fallback's buffer, allocated only when `splice` is refused.
const COPY_BYTES: usize = 64 * 1024;

/// Moves bytes from `from` to `to` until `from` ends (then shuts `to`'s
/// writing side, so the other end sees the end too) or either fails;
/// `counter` gains every byte delivered to `to`.
pub(crate) async fn relay(from: &TcpStream, to: &TcpStream, counter: &AtomicU64) {
    let finished = match Pipe::new() {
        Ok(pipe) => splice_relay(&pipe, from, to, counter).await,
        Err(_) => Moved::Refused,
    };
    if finished == Moved::Refused {
        copy_relay(from, to, counter).await;
    }
    // SAFETY: shutdown on a descriptor `to` owns and keeps open.
    unsafe {
        libc::shutdown(to.as_raw_fd(), libc::SHUT_WR);
    }
}

/// How a splice relay ended.
#[derive(Debug, PartialEq, Eq)]
enum Moved {
    /// `from` ended, or a socket failed.
    Done,
    /// The kernel refused `splice` before any byte moved: copy instead.
    Refused,
}

/// A non-blocking pipe, both ends closed when dropped.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let mut fds = [-1; 2];
        // SAFETY: pipe2 writes two descriptors into the array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors are fresh and ours.
        let pipe = unsafe {
            Pipe {
                read: OwnedFd::from_raw_fd(fds[0]),
                write: OwnedFd::from_raw_fd(fds[1]),
            }
        };
        // Larger moves, fewer calls; the default size (refused above
        // `/proc/sys/fs/pipe-max-size` for an unprivileged toolsmith) works too.
        // SAFETY: fcntl on our own descriptor.
        unsafe {
            libc::fcntl(
                pipe.write.as_raw_fd(),
                libc::F_SETPIPE_SZ,
                PIPE_BYTES as libc::c_int,
            );
        }
        Ok(pipe)
    }
}

fn splice(from: RawFd, to: RawFd, length: usize) -> io::Result<usize> {
    // SAFETY: splice between descriptors the caller holds open, no offsets.
    let moved = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            length,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    usize::try_from(moved).map_err(|_| io::Error::last_os_error())
}

/// Whether an error says `splice` does not work for these descriptors at all.
fn unsupported(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EINVAL | libc::ENOSYS | libc::EPERM | libc::EOPNOTSUPP)
    )
}

/// Fills the empty pipe from `from`, then drains it into `to`, until `from`
/// ends. The pipe is empty before every fill, so a fill's `EAGAIN` means
/// `from` has nothing; it holds bytes during every drain, so a drain's
/// `EAGAIN` means `to` is full.
async fn splice_relay(pipe: &Pipe, from: &TcpStream, to: &TcpStream, counter: &AtomicU64) -> Moved {
    let (pipe_read, pipe_write) = (pipe.read.as_raw_fd(), pipe.write.as_raw_fd());
    let mut moved_any = false;
    loop {
        let filled = from
            .async_io(Interest::READABLE, || {
                splice(from.as_raw_fd(), pipe_write, PIPE_BYTES)
            })
            .await;
        let mut held = match filled {
            Ok(0) => return Moved::Done,
            Ok(filled) => filled,
            Err(error) if !moved_any && unsupported(&error) => return Moved::Refused,
            Err(_) => return Moved::Done,
        };
        moved_any = true;
        while held > 0 {
            let drained = to
                .async_io(Interest::WRITABLE, || {
                    splice(pipe_read, to.as_raw_fd(), held)
                })
                .await;
            match drained {
                Ok(0) | Err(_) => return Moved::Done,
                Ok(drained) => {
                    held -= drained;
                    counter.fetch_add(drained as u64, Ordering::Relaxed);
                }
            }
        }
    }
}

/// The fallback: the same loop through a buffer of this connection's own.
async fn copy_relay(from: &TcpStream, to: &TcpStream, counter: &AtomicU64) {
    let mut buffer = vec![0u8; COPY_BYTES];
    loop {
        let read = match from
            .async_io(Interest::READABLE, || {
                receive(from.as_raw_fd(), &mut buffer)
            })
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        let mut sent = 0;
        while sent < read {
            match to
                .async_io(Interest::WRITABLE, || {
                    send(to.as_raw_fd(), &buffer[sent..read])
                })
                .await
            {
                Ok(0) | Err(_) => return,
                Ok(written) => {
                    sent += written;
                    counter.fetch_add(written as u64, Ordering::Relaxed);
                }
            }
        }
    }
}

/// One `recv` into `buffer` (`async_io` waits for readiness and retries on `EAGAIN`).
fn receive(socket: RawFd, buffer: &mut [u8]) -> io::Result<usize> {
    // SAFETY: recv into a live buffer of the length given.
    let read = unsafe { libc::recv(socket, buffer.as_mut_ptr().cast(), buffer.len(), 0) };
    usize::try_from(read).map_err(|_| io::Error::last_os_error())
}

/// One `send` of `bytes`, never raising `SIGPIPE`.
fn send(socket: RawFd, bytes: &[u8]) -> io::Result<usize> {
    // SAFETY: send from a live buffer of the length given.
    let sent = unsafe {
        libc::send(
            socket,
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    usize::try_from(sent).map_err(|_| io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// Two connected loopback sockets.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let near = TcpStream::connect(listener.local_addr().unwrap());
        let (near, far) = tokio::join!(near, listener.accept());
        (near.unwrap(), far.unwrap().0)
    }

    /// 3 MiB and a little, no two neighbouring 4 KiB pages alike: a lost, repeated
    /// or reordered chunk shows.
    fn payload() -> Vec<u8> {
        (0..3 * 1024 * 1024 + 4099u32)
            .map(|index| (index.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect()
    }

    /// Sends the payload through a relay (`copy` chooses the fallback) from one
    /// pair to the other and reads it back: every byte, in order, counted, and the
    /// end of the stream passed on.
    async fn through(copy: bool) {
        let (mut writer, from) = pair().await;
        let (to, mut reader) = pair().await;
        let counter = AtomicU64::new(0);
        let sent = payload();
        let relayed = async {
            if copy {
                copy_relay(&from, &to, &counter).await;
            } else {
                // Spliced to the end, not handed to the fallback.
                let pipe = Pipe::new().unwrap();
                assert_eq!(splice_relay(&pipe, &from, &to, &counter).await, Moved::Done);
            }
            // SAFETY: as in `relay`.
            unsafe {
                libc::shutdown(to.as_raw_fd(), libc::SHUT_WR);
            }
        };
        let write = async {
            writer.write_all(&sent).await.unwrap();
            writer.shutdown().await.unwrap();
        };
        let mut received = Vec::new();
        let read = reader.read_to_end(&mut received);
        let ((), (), read) = tokio::join!(relayed, write, read);
        read.unwrap();
        assert_eq!(received.len(), sent.len());
        assert!(received == sent, "the relayed bytes differ");
        assert_eq!(counter.load(Ordering::Relaxed), sent.len() as u64);
    }

    #[tokio::test]
    async fn splice_moves_every_byte_in_order_and_the_end() {
        through(false).await;
    }

    #[tokio::test]
    async fn the_copy_fallback_moves_every_byte_in_order_and_the_end() {
        through(true).await;
    }

    #[test]
    fn refusals_of_splice_itself_choose_the_fallback() {
        for errno in [libc::EINVAL, libc::ENOSYS, libc::EPERM, libc::EOPNOTSUPP] {
            assert!(unsupported(&io::Error::from_raw_os_error(errno)));
        }
        for errno in [libc::EPIPE, libc::ECONNRESET, libc::EAGAIN] {
            assert!(!unsupported(&io::Error::from_raw_os_error(errno)));
        }
    }
}

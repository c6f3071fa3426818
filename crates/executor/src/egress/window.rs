//! The TCP receive window of a proxied run's own sockets. In the run's network namespace a
//! program reaches one peer only, the proxy on the namespace's loopback; left at the
//! kernel's default (`tcp_rmem`'s middle value, 128 KiB) a socket there starts with a
//! 64 KiB window, so the proxy hands it a response in rounds: a burst, a wait for the
//! program to read and open the window, another burst, each round a wake-up of the proxy's
//! thread and of the program's. The namespace's first process raises the default to
//! [`DEFAULT_BYTES`] (the kernel keeps `tcp_rmem` per network namespace; the host's is
//! untouched), before `/proc/sys` becomes read-only for the run, so the proxy can hand over
//! a 1 MiB response in one go. It is a default, not a grant: a program could ask the same of
//! each socket (`SO_RCVBUF`), the memory its sockets hold is charged to its own cgroup, and
//! the namespace's maximum is kept.

use std::io::Write as _;

/// The receive buffer a socket of a proxied run starts with.
pub(crate) const DEFAULT_BYTES: u64 = 4 << 20;

/// `tcp_rmem` ("min default max") with its default raised to [`DEFAULT_BYTES`] (never above
/// the maximum, never lowered), written into `out`; its length, or `None` when `current` is
/// not three numbers or needs no change.
pub(crate) fn widened(current: &[u8], out: &mut [u8; 96]) -> Option<usize> {
    let mut numbers = [0u64; 3];
    let mut words = current
        .split(|byte| byte.is_ascii_whitespace())
        .filter(|word| !word.is_empty());
    for number in &mut numbers {
        let word = words.next()?;
        *number = std::str::from_utf8(word).ok()?.parse().ok()?;
    }
    if words.next().is_some() {
        return None;
    }
    let [min, default, max] = numbers;
    let wanted = DEFAULT_BYTES.min(max);
    if wanted <= default {
        return None;
    }
    let mut cursor = std::io::Cursor::new(&mut out[..]);
    writeln!(cursor, "{min} {wanted} {max}").ok()?;
    usize::try_from(cursor.position()).ok()
}

/// In the namespace's first process: raises the namespace's `tcp_rmem` default as
/// [`widened`] says. False when it could not (the run is then only slower); only system
/// calls on stack memory (the child shares the executor's memory; `write!` into a slice
/// allocates nothing).
///
/// # Safety
/// Call only in the clone child, in the run's own network namespace.
pub(crate) unsafe fn widen_receive_window() -> bool {
    let path = c"/proc/sys/net/ipv4/tcp_rmem";
    let mut current = [0u8; 96];
    let mut wanted = [0u8; 96];
    // SAFETY: open, read and write on a descriptor of our own, into and from stack buffers.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let read = libc::read(fd, current.as_mut_ptr().cast(), current.len());
        let done = match usize::try_from(read)
            .ok()
            .map(|read| widened(&current[..read], &mut wanted))
        {
            Some(Some(length)) => {
                libc::pwrite(fd, wanted.as_ptr().cast(), length, 0) == length as isize
            }
            // Already at least as wide.
            Some(None) => true,
            None => false,
        };
        libc::close(fd);
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widen(current: &str) -> Option<String> {
        let mut out = [0u8; 96];
        widened(current.as_bytes(), &mut out)
            .map(|length| String::from_utf8(out[..length].to_vec()).unwrap())
    }

    #[test]
    fn the_default_rises_and_the_bounds_stay() {
        assert_eq!(
            widen("4096\t131072\t6291456\n").as_deref(),
            Some("4096 4194304 6291456\n")
        );
        assert_eq!(
            widen("4096\t131072\t33554432\n").as_deref(),
            Some("4096 4194304 33554432\n")
        );
        // Never above the maximum, never lowered.
        assert_eq!(
            widen("4096 131072 1048576").as_deref(),
            Some("4096 1048576 1048576\n")
        );
        assert_eq!(widen("4096 8388608 33554432"), None);
        assert_eq!(widen("4096 131072"), None);
        assert_eq!(widen("4096 131072 6291456 1"), None);
        assert_eq!(widen("a b c"), None);
    }
}

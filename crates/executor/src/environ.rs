//! Keeping secrets out of the executor's `/proc/<pid>/environ`, for kernels
//! where tools cannot be given a private `/proc`.
//!
//! The kernel shows a process's *initial* environment (the block `execve`
//! put at the top of its stack) in `/proc/<pid>/environ`, whatever the
//! process did with its environment since; a tool of the same uid can read
//! it (isolation.md pitfall 15). [`seal_initial_environment`] moves every
//! variable to the heap and blanks that block, so the file shows only NUL
//! bytes while the process keeps its environment.
//!
//! A tool that could read the executor's memory would still find the heap
//! copies: [`forbid_dumping`] closes `/proc/<pid>/mem` to it, and
//! [`scrub_environment`] drops (and zeroes) the variables that neither a
//! tool receives nor toolsmith reads.

use std::io;

use crate::Error;

/// Variables the dynamic loader may still point into after start-up (it
/// keeps a pointer to `LD_LIBRARY_PATH` for later `dlopen` calls), so their
/// bytes are left in place. They name libraries, not secrets.
const LOADER_PREFIXES: [&str; 2] = ["LD_", "GLIBC_TUNABLES"];

/// Copies every environment variable to the heap and overwrites the
/// process's initial environment block with NUL bytes, so that
/// `/proc/<pid>/environ` no longer shows them. `std::env` keeps working.
///
/// Returns how many bytes were blanked.
///
/// # Safety
/// Must be called before the process starts a second thread and before
/// anything keeps a pointer returned by `getenv`: it calls `setenv` for
/// every variable.
pub unsafe fn seal_initial_environment() -> Result<usize, Error> {
    let (start, end) = environ_block().map_err(|source| Error::Sys {
        call: "reading /proc/self/stat",
        source,
    })?;
    if end <= start {
        return Ok(0);
    }
    let block_len = end - start;
    // SAFETY: the kernel reports [start, end) as the environment block
    // mapped at the top of our stack, which stays mapped and writable.
    let block = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, block_len) };
    let mut kept: Vec<(usize, usize)> = Vec::new();
    for (name, value) in std::env::vars_os() {
        let Some(name_text) = name.to_str() else {
            zero(value);
            continue;
        };
        if LOADER_PREFIXES
            .iter()
            .any(|prefix| name_text.starts_with(prefix))
        {
            zero(value);
            continue;
        }
        if name.is_empty() || name_text.contains('=') {
            zero(value);
            continue;
        }
        // SAFETY: the caller guarantees no other thread runs; set_var
        // makes glibc point the entry at a fresh heap copy.
        unsafe { std::env::set_var(&name, &value) };
        // This copy is freed next: zeroed first, so that the freed heap
        // does not keep the value for a later reader of the process's memory.
        zero(value);
    }
    // Entries still pointing into the block (loader variables, odd names)
    // keep their bytes; everything else is blanked.
    // SAFETY: environ is a NULL-terminated array of C strings.
    unsafe {
        let mut entry = environ;
        while !(*entry).is_null() {
            let address = *entry as usize;
            if (start..end).contains(&address) {
                let length = libc::strlen(*entry);
                kept.push((address - start, address - start + length));
            }
            entry = entry.add(1);
        }
    }
    let mut blanked = 0;
    for (index, byte) in block.iter_mut().enumerate() {
        if !kept.iter().any(|&(from, to)| (from..to).contains(&index)) {
            if *byte != 0 {
                blanked += 1;
            }
            *byte = 0;
        }
    }
    Ok(blanked)
}

/// Overwrites a string's bytes before it is freed.
fn zero(value: std::ffi::OsString) {
    use std::os::unix::ffi::OsStringExt;
    let mut bytes = value.into_vec();
    bytes.fill(0);
    // The writes must not be optimised away as dead stores.
    std::hint::black_box(&bytes);
}

unsafe extern "C" {
    static mut environ: *const *const libc::c_char;
}

/// The `env_start` and `env_end` fields (50 and 51) of `/proc/self/stat`.
fn environ_block() -> io::Result<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The command name (field 2) may contain spaces; fields after it are plain.
    let after_name = stat
        .rfind(')')
        .map(|index| &stat[index + 1..])
        .ok_or_else(|| io::Error::other("unexpected /proc/self/stat format"))?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // after_name starts at field 3.
    let field = |number: usize| -> io::Result<usize> {
        fields
            .get(number - 3)
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| io::Error::other("no env_start/env_end in /proc/self/stat"))
    };
    Ok((field(50)?, field(51)?))
}

/// Removes from the process's environment every variable for which `keep`
/// returns false, overwriting its value with NUL bytes first, so that the
/// heap copy no longer holds it for a reader of `/proc/<pid>/mem`.
///
/// Returns the names removed.
///
/// # Safety
/// Must be called while the process has a single thread: it writes the
/// environment's strings in place and calls `unsetenv`.
pub unsafe fn scrub_environment(keep: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut removed: Vec<std::ffi::CString> = Vec::new();
    // SAFETY: environ is a NULL-terminated array of C strings, each of
    // which is either in the initial block or a heap copy made by setenv;
    // both are writable, and the caller guarantees no concurrent reader.
    unsafe {
        let mut entry = environ;
        while !(*entry).is_null() {
            let text = std::ffi::CStr::from_ptr(*entry).to_bytes();
            if let Some(equals) = text.iter().position(|&byte| byte == b'=') {
                let name = &text[..equals];
                let kept = std::str::from_utf8(name).is_ok_and(keep);
                if !kept && let Ok(c_name) = std::ffi::CString::new(name) {
                    let value = (*entry).cast_mut().add(equals + 1);
                    std::ptr::write_bytes(value, 0, text.len() - equals - 1);
                    removed.push(c_name);
                }
            }
            entry = entry.add(1);
        }
        for name in &removed {
            libc::unsetenv(name.as_ptr());
        }
    }
    removed
        .into_iter()
        .map(|name| name.to_string_lossy().into_owned())
        .collect()
}

/// Makes the process non-dumpable (`PR_SET_DUMPABLE` 0): no core dump, and a
/// process of the same uid without `CAP_SYS_PTRACE` can neither attach to it
/// nor open its `/proc/<pid>/mem`, `environ` or descriptors. Tools get their
/// own dumpable flag back at `execve`.
pub fn forbid_dumping() -> Result<(), Error> {
    nix::sys::prctl::set_dumpable(false).map_err(|errno| Error::Sys {
        call: "prctl(PR_SET_DUMPABLE)",
        source: io::Error::from(errno),
    })
}

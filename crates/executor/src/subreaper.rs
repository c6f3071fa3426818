//! The process-wide child-subreaper flag, held while any executor with the
//! subreaper backend exists.
//!
//! `PR_SET_CHILD_SUBREAPER` belongs to the whole process: while it is set,
//! every orphaned descendant of this process is re-parented to it, including
//! those of runs under other backends, which only the subreaper sweep reaps.
//! So the flag is counted and cleared when the last subreaper executor goes,
//! and docs/executor.md advises one backend per process.

use std::sync::Mutex;

use crate::Error;

static HOLDERS: Mutex<usize> = Mutex::new(0);

/// Sets the flag (if no other executor holds it) and counts this holder.
pub(crate) fn acquire() -> Result<(), Error> {
    let mut holders = HOLDERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if *holders == 0 {
        set(true)?;
    }
    *holders += 1;
    Ok(())
}

/// Uncounts one holder, clearing the flag when it was the last.
pub(crate) fn release() {
    let mut holders = HOLDERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    *holders = holders.saturating_sub(1);
    if *holders == 0
        && let Err(error) = set(false)
    {
        tracing::warn!(%error, "could not clear the child-subreaper flag");
    }
}

fn set(on: bool) -> Result<(), Error> {
    nix::sys::prctl::set_child_subreaper(on).map_err(|errno| Error::Sys {
        call: "prctl(PR_SET_CHILD_SUBREAPER)",
        source: std::io::Error::from(errno),
    })
}

//! A full disk: every generator command (generate fresh, a new name, a replacement, rollback,
//! `new`) run on a small tmpfs holding the tools directory and its `.history.git`, at every fill
//! level from no free page up to enough. Each run succeeds completely or fails clearly with the
//! live tool unchanged, the history recording exactly what is live and no staging debris; after
//! the space is freed the same command succeeds.

use std::ffi::CString;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use serde_json::json;

use super::{copy_tree, generate, must, request, rollback, run, tools_dir};
use crate::context::TestContext;

const PAGE: u64 = 4096;

/// A tmpfs mounted by the test, unmounted when dropped (also when the test panics).
struct Tmpfs {
    at: PathBuf,
}

impl Tmpfs {
    fn mount(at: &Path, bytes: u64) -> Option<Tmpfs> {
        fs::create_dir_all(at).unwrap();
        let source = CString::new("tmpfs").unwrap();
        let target = CString::new(at.as_os_str().as_encoded_bytes()).unwrap();
        let options = CString::new(format!("size={bytes},mode=0755")).unwrap();
        // SAFETY: mount(2) with valid NUL-terminated strings; the target is the test's own
        // directory.
        let mounted = unsafe {
            libc::mount(
                source.as_ptr(),
                target.as_ptr(),
                source.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                options.as_ptr().cast(),
            )
        };
        if mounted != 0 {
            eprintln!(
                "WARNING: cannot mount a tmpfs ({}): the disk-full test did not run",
                std::io::Error::last_os_error()
            );
            return None;
        }
        Some(Tmpfs {
            at: at.to_path_buf(),
        })
    }

    fn free(&self) -> u64 {
        let path = CString::new(self.at.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: statvfs(2) fills the zeroed struct it is given.
        let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: as above; `path` is NUL-terminated.
        assert_eq!(unsafe { libc::statvfs(path.as_ptr(), &raw mut stats) }, 0);
        stats.f_bavail * stats.f_frsize
    }

    fn filler(&self) -> PathBuf {
        self.at.join("filler")
    }

    /// Fills the file system with real pages until `left` bytes are free.
    fn fill_leaving(&self, left: u64) {
        let free = self.free();
        assert!(free >= left, "only {free} bytes free, {left} wanted");
        let mut file = fs::File::create(self.filler()).unwrap();
        let chunk = vec![0x5a_u8; 64 * 1024];
        let mut remaining = usize::try_from(free - left).unwrap();
        while remaining > 0 {
            let now = remaining.min(chunk.len());
            file.write_all(&chunk[..now]).unwrap();
            remaining -= now;
        }
        drop(file);
        assert_eq!(self.free(), left, "the filler did not leave exactly {left}");
    }

    /// Empties the file system and copies `template` (the starting state) in.
    fn restore(&self, template: &Path) {
        for entry in fs::read_dir(&self.at).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                fs::remove_dir_all(&path).unwrap();
            } else {
                fs::remove_file(&path).unwrap();
            }
        }
        if template.exists() {
            copy_tree(template, &self.at);
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let target = CString::new(self.at.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: umount2(2) of the tmpfs this guard mounted; detached if still busy.
        if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } != 0 {
            eprintln!(
                "WARNING: cannot unmount the test tmpfs at {}: {}",
                self.at.display(),
                std::io::Error::last_os_error()
            );
        }
    }
}

/// What a command produces, to compare the file system with.
struct Operation {
    label: &'static str,
    /// The file the command makes live.
    tool: &'static str,
    /// Whether the tool's versions are recorded in `.history.git`.
    recorded: bool,
    command: Box<dyn Fn(&TestContext) -> Command>,
}

/// The commit the history's ref of `tool` names, and the blob it records; `None` if there is
/// no history or no ref (read by git itself, which writes nothing).
fn recorded_now(tools: &Path, tool: &str) -> Option<Vec<u8>> {
    if !tools.join(".history.git").exists() {
        return None;
    }
    #[expect(clippy::disallowed_methods, reason = "git itself reads the history")]
    let output = Command::new("git")
        .arg("--git-dir")
        .arg(tools.join(".history.git"))
        .args(["show", &format!("refs/tools/{tool}:{tool}")])
        .output()
        .unwrap();
    output.status.success().then_some(output.stdout)
}

fn check(
    context: &TestContext,
    operation: &Operation,
    old: Option<&[u8]>,
    new: &[u8],
    free: u64,
    output: &Output,
) -> bool {
    let tools = tools_dir(context);
    let at = format!("{} with {free} bytes free", operation.label);
    let live = fs::read(tools.join(operation.tool)).ok();
    let succeeded = output.status.success();
    if succeeded {
        assert_eq!(live.as_deref(), Some(new), "{at}: succeeded, not live");
    } else {
        assert_eq!(
            live.as_deref(),
            old,
            "{at}: failed and changed the live tool"
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("No space left on device"),
            "{at}: the failure does not say the disk is full: {stderr}"
        );
    }
    if operation.recorded {
        assert_eq!(
            recorded_now(&tools, operation.tool),
            live,
            "{at}: the history does not record exactly what is live"
        );
    }
    let staging: Vec<_> = fs::read_dir(tools.join(".staging"))
        .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
        .unwrap_or_default();
    assert!(staging.is_empty(), "{at}: staging left {staging:?}");
    let partial: Vec<_> = fs::read_dir(&tools)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".partial"))
                .collect()
        })
        .unwrap_or_default();
    assert!(partial.is_empty(), "{at}: left {partial:?}");
    succeeded
}

/// Runs `operation` from the starting state `template` at each fill level from no free page
/// up, until three levels in a row succeed; after each failure, frees the space and checks
/// the same command then succeeds. Returns the levels that failed and the last failure's
/// message.
fn every_fill_level(context: &TestContext, tmpfs: &Tmpfs, operation: &Operation) -> (u64, String) {
    let template = context.root.join(format!("template-{}", operation.label));
    let _none = fs::remove_dir_all(&template);
    if tmpfs.at.exists() {
        copy_tree(&tmpfs.at, &template);
    }
    let tools = tools_dir(context);
    let old = fs::read(tools.join(operation.tool)).ok();
    must(&run(&mut (operation.command)(context)));
    let new = fs::read(tools.join(operation.tool)).unwrap();
    assert_ne!(
        old.as_ref(),
        Some(&new),
        "{}: nothing changes",
        operation.label
    );
    let (mut failed, mut in_a_row, mut message) = (0, 0, String::new());
    let mut free = 0;
    while in_a_row < 3 {
        assert!(free < 400 * PAGE, "{}: never succeeded", operation.label);
        tmpfs.restore(&template);
        tmpfs.fill_leaving(free);
        let output = run(&mut (operation.command)(context));
        if check(context, operation, old.as_deref(), &new, free, &output) {
            in_a_row += 1;
        } else {
            assert_eq!(
                in_a_row, 0,
                "{}: failed at {free} after succeeding",
                operation.label
            );
            failed += 1;
            message = String::from_utf8_lossy(&output.stderr).trim().to_owned();
            fs::remove_file(tmpfs.filler()).unwrap();
            let next = run(&mut (operation.command)(context));
            must(&next);
            assert!(check(context, operation, old.as_deref(), &new, free, &next));
        }
        free += PAGE;
    }
    assert!(failed > 0, "{}: never ran out of space", operation.label);
    tmpfs.restore(&template);
    (failed, message)
}

fn generating(answer: &'static str, replace: bool) -> Box<dyn Fn(&TestContext) -> Command> {
    Box::new(move |context| generate(context, answer, replace))
}

/// Acceptance (issue 24, point 2): every generator command at every fill level of a full disk.
#[test]
fn a_full_disk_fails_a_registration_cleanly_at_every_fill_level() {
    let context = TestContext::new();
    context.own_project();
    let Some(tmpfs) = Tmpfs::mount(&context.project.join(".toolsmith"), 2 * 1024 * 1024) else {
        return;
    };
    let started = Instant::now();
    let mut figures = Vec::new();
    let mut measure = |operation: Operation| {
        let (failed, message) = every_fill_level(&context, &tmpfs, &operation);
        figures.push(format!("{} failed at {failed} levels", operation.label));
        message
    };
    let fresh = measure(Operation {
        label: "fresh",
        tool: "tell_answer",
        recorded: true,
        command: generating("fresh", false),
    });
    let mut other = request("other", false);
    other["name"] = json!("other_tool");
    context.project_file("other.json", &other.to_string());
    must(&run(context.command().args([
        "generate",
        "--request",
        "other.json",
    ])));
    measure(Operation {
        label: "new name",
        tool: "tell_answer",
        recorded: true,
        command: generating("named", false),
    });
    must(&run(&mut generate(&context, "first", false)));
    measure(Operation {
        label: "replace",
        tool: "tell_answer",
        recorded: true,
        command: generating("second", true),
    });
    must(&run(&mut generate(&context, "second", true)));
    let rolled = measure(Operation {
        label: "rollback",
        tool: "tell_answer",
        recorded: true,
        command: Box::new(rollback),
    });
    measure(Operation {
        label: "new",
        tool: "sh_tool",
        recorded: false,
        command: Box::new(|context: &TestContext| {
            let mut command = context.command();
            command.args(["new", "sh_tool", "--lang", "bash"]);
            command
        }),
    });
    eprintln!(
        "disk full: {}; {:?}\nfresh said: {fresh}\nrollback said: {rolled}",
        figures.join(", "),
        started.elapsed()
    );
}

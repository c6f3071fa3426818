//! The mount, IPC and UTS namespaces of each run (`mounts.rs`), each
//! mechanism run with and without its sandbox, so that a test that could not
//! fail is caught. Programs here run as the test's uid (root on CI), with
//! every capability: they attempt the changes directly.
//!
//! A mechanism the kernel refuses is announced loudly and skipped;
//! `TOOLSMITH_REQUIRE_BACKENDS=1` makes it a failure.

#![expect(
    clippy::print_stderr,
    reason = "unavailable kernel features must be announced loudly"
)]

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toolsmith_executor::{
    BackendChoice, Command, Enforcement, Executor, ExecutorConfig, Filesystem, Limits, Outcome,
    Probe, Sandbox,
};

fn executor() -> Executor {
    Executor::new(ExecutorConfig {
        backend: BackendChoice::Auto,
        max_concurrent: None,
    })
    .unwrap()
}

/// True when the feature is there; otherwise says so loudly (or fails).
fn available(name: &str, probe: &Probe) -> bool {
    if probe.available {
        return true;
    }
    assert!(
        std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_none(),
        "{name} is required but unavailable: {}",
        probe.detail
    );
    eprintln!(
        "WARNING: {name} UNAVAILABLE on this kernel, its test is SKIPPED: {}",
        probe.detail
    );
    false
}

/// True when the test runs as root, the case these mechanisms exist for.
fn root(test: &str) -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    eprintln!("WARNING: {test} needs root (a tool with capabilities); SKIPPED");
    false
}

fn limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(10),
        grace: Duration::from_millis(200),
        ..Limits::recommended()
    }
}

/// Runs `sh -c script` with `args` as `$1...`.
fn sh(
    executor: &Executor,
    script: &str,
    args: &[&OsStr],
    cwd: &Path,
    sandbox: Sandbox,
    limits: &Limits,
) -> Outcome {
    let mut command = Command::new(Path::new("/bin/sh"), cwd).unwrap();
    command
        .arg(OsStr::new("-c"))
        .arg(OsStr::new(script))
        .arg(OsStr::new("sh"));
    for arg in args {
        command.arg(arg);
    }
    command.env(
        OsStr::new("PATH"),
        OsStr::new("/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"),
    );
    command.sandbox(sandbox);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(executor.run(&command, limits)).unwrap()
}

fn mounts_only() -> Sandbox {
    Sandbox {
        private_pids: true,
        private_mounts: true,
        ..Sandbox::none()
    }
}

fn project(root: &Path, protected: Vec<PathBuf>) -> Sandbox {
    Sandbox {
        filesystem: Filesystem::Project {
            root: root.to_path_buf(),
            enforcement: Enforcement::Required,
        },
        private_pids: true,
        private_mounts: true,
        protected,
        ..Sandbox::none()
    }
}

fn read_only() -> Sandbox {
    Sandbox {
        filesystem: Filesystem::ReadOnly(Enforcement::Required),
        private_pids: true,
        private_mounts: true,
        ..Sandbox::none()
    }
}

/// The host's mounts that mention a run's temporary directory.
fn run_mounts() -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|line| line.contains("toolsmith-run-"))
        .map(str::to_owned)
        .collect()
}

const METADATA: &str = r#"
f=$1
chmod 4777 "$f" 2>/dev/null && echo chmod
chown 1:1 "$f" 2>/dev/null && echo chown
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.toolsmith", b"1")' "$f" 2>/dev/null && echo setxattr
touch -d 2000-01-01 "$f" 2>/dev/null && echo touch
chattr +i "$f" 2>/dev/null && echo chattr
true
"#;

#[test]
fn metadata_outside_the_writable_roots_cannot_change() {
    let executor = executor();
    if !root("metadata_outside_the_writable_roots_cannot_change")
        || !available("mount namespace", &executor.features().private_mounts)
        || !available("landlock", &executor.features().landlock)
    {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("victim");
    std::fs::write(&file, "data").unwrap();
    let before = std::fs::metadata(&file).unwrap();
    let work = tempfile::tempdir().unwrap();
    for (name, sandbox) in [
        ("read-only", read_only()),
        ("project", project(work.path(), Vec::new())),
    ] {
        let outcome = sh(
            &executor,
            METADATA,
            &[file.as_os_str()],
            work.path(),
            sandbox,
            &limits(),
        );
        assert!(outcome.sandbox.private_mounts, "{name}: {outcome:?}");
        assert_eq!(outcome.stdout.text_lossy(), "", "{name}: {outcome:?}");
        let after = std::fs::metadata(&file).unwrap();
        assert_eq!(after.mode(), before.mode(), "{name}");
        assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
        assert_eq!(after.mtime(), before.mtime(), "{name}");
        assert!(xattr_absent(&file), "{name}");
    }

    // Without the sandbox, root changes all of it.
    let outcome = sh(
        &executor,
        METADATA,
        &[file.as_os_str()],
        work.path(),
        Sandbox::none(),
        &limits(),
    );
    #[expect(
        clippy::disallowed_methods,
        reason = "the test undoes the unsandboxed chattr +i so its temporary directory can go"
    )]
    let _ = std::process::Command::new("chattr")
        .arg("-i")
        .arg(&file)
        .status();
    let printed = outcome.stdout.text_lossy();
    for change in ["chmod", "chown", "setxattr", "touch"] {
        assert!(printed.contains(change), "{change} missing: {outcome:?}");
    }
    if !printed.contains("chattr") {
        eprintln!("WARNING: the filesystem of the temporary directory has no immutable flag");
    }
}

fn xattr_absent(path: &Path) -> bool {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path and name, no buffer.
    let size = unsafe {
        libc::getxattr(
            c_path.as_ptr(),
            c"user.toolsmith".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    };
    size < 0
}

const MKNOD: &str = r#"
mknod "$TMPDIR/char" c 1 3 2>/dev/null && echo tmp-char
mknod "$TMPDIR/block" b 7 0 2>/dev/null && echo tmp-block
mknod ./char c 1 3 2>/dev/null && echo project-char
mkfifo ./fifo && echo project-fifo
echo data > "$TMPDIR/file" && echo tmp-file
true
"#;

#[test]
fn no_device_node_can_be_made_in_the_writable_roots() {
    let executor = executor();
    if !root("no_device_node_can_be_made_in_the_writable_roots")
        || !available("mount namespace", &executor.features().private_mounts)
        || !available("landlock", &executor.features().landlock)
    {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let outcome = sh(
        &executor,
        MKNOD,
        &[],
        work.path(),
        project(work.path(), Vec::new()),
        &limits(),
    );
    // Fifos and files are fine; devices are not.
    assert_eq!(
        outcome.stdout.text_lossy(),
        "project-fifo\ntmp-file\n",
        "{outcome:?}"
    );

    let unrestricted = sh(
        &executor,
        "mknod ./char c 1 3 && echo project-char",
        &[],
        work.path(),
        Sandbox::none(),
        &limits(),
    );
    assert_eq!(unrestricted.stdout.text_lossy(), "project-char\n");
}

const PROTECTED: &str = r#"
echo x > .toolsmith/config.toml 2>/dev/null && echo config
echo x > .toolsmith/tools/planted 2>/dev/null && echo tool
echo x > .git/hooks/pre-commit 2>/dev/null && echo hook
echo x >> .git/config 2>/dev/null && echo git-config
mv .git .git-moved 2>/dev/null && echo moved
rm -rf .toolsmith 2>/dev/null; [ -e .toolsmith/config.toml ] || echo removed
echo x > src/main.rs && echo project-file
true
"#;

#[test]
fn protected_paths_stay_read_only_under_project() {
    let executor = executor();
    if !available("mount namespace", &executor.features().private_mounts)
        || !available("landlock", &executor.features().landlock)
    {
        return;
    }
    let make = || {
        let work = tempfile::tempdir().unwrap();
        for dir in [".git/hooks", ".toolsmith/tools", "src"] {
            std::fs::create_dir_all(work.path().join(dir)).unwrap();
        }
        std::fs::write(work.path().join(".git/config"), "[core]\n").unwrap();
        std::fs::write(work.path().join(".toolsmith/config.toml"), "").unwrap();
        work
    };
    let work = make();
    let protected = vec![
        work.path().join(".git"),
        work.path().join(".toolsmith"),
        work.path().join("missing"),
    ];
    let outcome = sh(
        &executor,
        PROTECTED,
        &[],
        work.path(),
        project(work.path(), protected),
        &limits(),
    );
    assert_eq!(outcome.stdout.text_lossy(), "project-file\n", "{outcome:?}");
    assert_eq!(
        std::fs::read_to_string(work.path().join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!work.path().join(".git/hooks/pre-commit").exists());
    assert!(!work.path().join(".toolsmith/tools/planted").exists());

    let work = make();
    let unprotected = sh(
        &executor,
        PROTECTED,
        &[],
        work.path(),
        project(work.path(), Vec::new()),
        &limits(),
    );
    assert_eq!(
        unprotected.stdout.text_lossy(),
        "config\ntool\nhook\ngit-config\nmoved\nremoved\nproject-file\n",
        "{unprotected:?}"
    );
}

/// Lists the keys of the SysV objects visible inside, after making one of each.
const IPC: &str = r#"
ipcmk -M 4096 >/dev/null && ipcmk -Q >/dev/null && ipcmk -S 1 >/dev/null || echo ipcmk-failed
for kind in shm msg sem; do awk 'NR > 1 { print $1 }' /proc/sysvipc/$kind; done
echo "host=$(hostname)"
"#;

fn host_ipc_keys() -> Vec<String> {
    ["shm", "msg", "sem"]
        .iter()
        .flat_map(|kind| {
            std::fs::read_to_string(format!("/proc/sysvipc/{kind}"))
                .unwrap()
                .lines()
                .skip(1)
                .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn sysv_objects_die_with_the_call_and_the_hosts_are_invisible() {
    let executor = executor();
    if !available("ipc namespace", &executor.features().ipc_namespace) {
        return;
    }
    // A host segment with a key of the test's own.
    let key: libc::key_t = 0x7001_0000 | (std::process::id() as libc::key_t & 0xffff);
    // SAFETY: a new 4 KiB segment; removed below.
    let host_segment = unsafe { libc::shmget(key, 4096, libc::IPC_CREAT | 0o600) };
    assert!(host_segment >= 0, "{}", std::io::Error::last_os_error());
    let work = tempfile::tempdir().unwrap();
    let sandbox = Sandbox {
        private_ipc: true,
        ..mounts_only()
    };
    let outcome = sh(&executor, IPC, &[], work.path(), sandbox, &limits());
    let printed = outcome.stdout.text_lossy();
    let inside: Vec<&str> = printed
        .lines()
        .filter(|line| !line.starts_with("host="))
        .collect();
    assert!(outcome.sandbox.private_ipc);
    // Exactly its own three objects, not the host's.
    assert_eq!(inside.len(), 3, "{outcome:?}");
    assert!(!inside.contains(&key.to_string().as_str()), "{outcome:?}");
    assert!(printed.contains("host=toolsmith\n"), "{outcome:?}");
    // And none of them outlived the call.
    let host = host_ipc_keys();
    for key in &inside {
        assert!(
            !host.contains(&(*key).to_owned()),
            "{key} outlived the call"
        );
    }

    // Without the namespace the host's segment is in sight and the segment stays.
    let outcome = sh(
        &executor,
        &format!(
            "awk 'NR > 1 {{ print $1 }}' /proc/sysvipc/shm | grep -qx {key} && echo host-visible
             ipcmk -M 4096 | awk '{{ print $NF }}'"
        ),
        &[],
        work.path(),
        mounts_only(),
        &limits(),
    );
    let printed = outcome.stdout.text_lossy();
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 2, "{outcome:?}");
    assert_eq!(lines[0], "host-visible");
    let leaked: libc::c_int = lines[1].parse().unwrap();
    let shm = std::fs::read_to_string("/proc/sysvipc/shm").unwrap();
    let outlived = shm
        .lines()
        .any(|line| line.split_whitespace().nth(1) == Some(lines[1]));
    // SAFETY: removing the segments this test made.
    unsafe {
        libc::shmctl(leaked, libc::IPC_RMID, std::ptr::null_mut());
        libc::shmctl(host_segment, libc::IPC_RMID, std::ptr::null_mut());
    }
    assert!(outlived, "the unsandboxed call's segment should outlive it");
}

const SYSTEM_FILES: &str = r#"
p=$(awk -F: '$2 == "pids" { print $3 }' /proc/self/cgroup)
f=/sys/fs/cgroup/pids$p/pids.max
[ -w "$f" ] && cat "$f" > "$f" 2>/dev/null && echo cgroup
u=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
g=/sys/fs/cgroup/unified$u/cgroup.procs
[ -e "$g" ] && echo $$ > "$g" 2>/dev/null && echo cgroup2
mkdir /sys/fs/cgroup/pids$p/nested 2>/dev/null && echo nested
echo 1 > /proc/sys/vm/drop_caches 2>/dev/null && echo proc-sys
[ -f /proc/kcore ] && echo kcore
[ -e /dev/sda ] || [ -e /dev/vda ] || [ -e /dev/loop0 ] && echo disk
echo "dev: $(ls /dev | tr '\n' ' ')"
echo data > /dev/null && head -c 4 /dev/urandom | wc -c
true
"#;

#[test]
fn cgroup_sys_and_proc_files_cannot_be_written_and_dev_is_minimal() {
    let executor = executor();
    if !root("cgroup_sys_and_proc_files_cannot_be_written_and_dev_is_minimal")
        || !available("mount namespace", &executor.features().private_mounts)
    {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let outcome = sh(
        &executor,
        SYSTEM_FILES,
        &[],
        work.path(),
        mounts_only(),
        &limits(),
    );
    assert!(outcome.sandbox.private_mounts);
    assert_eq!(
        outcome.stdout.text_lossy(),
        "dev: fd full null ptmx pts random shm stderr stdin stdout tty urandom zero \n4\n",
        "{outcome:?}"
    );

    // Without the namespace the cgroup files and the disks are there.
    let outcome = sh(
        &executor,
        "p=$(awk -F: '$2 == \"pids\" { print $3 }' /proc/self/cgroup)
         f=/sys/fs/cgroup/pids$p/pids.max
         cat \"$f\" > \"$f\" && echo cgroup
         [ -f /proc/kcore ] && echo kcore
         true",
        &[],
        work.path(),
        Sandbox::none(),
        &limits(),
    );
    let printed = outcome.stdout.text_lossy();
    if !printed.contains("cgroup") {
        eprintln!("WARNING: no v1 pids cgroup for the run here; the cgroup half is weaker");
    }
    assert_eq!(
        printed.contains("kcore"),
        Path::new("/proc/kcore").is_file(),
        "{outcome:?}"
    );
}

#[test]
fn tmpdir_is_a_capped_tmpfs_and_nothing_of_the_call_stays_on_the_host() {
    let executor = executor();
    if !available("mount namespace", &executor.features().private_mounts)
        || !available("landlock", &executor.features().landlock)
    {
        return;
    }
    let mounts_before = run_mounts();
    let work = tempfile::tempdir().unwrap();
    let limits = Limits {
        tmp_size: Some(2 << 20),
        ..limits()
    };
    let outcome = sh(
        &executor,
        r#"echo "dir=$TMPDIR"
           stat -f -c %T "$TMPDIR"
           stat -c %a "$TMPDIR"
           echo shm > /dev/shm/x && cat "$TMPDIR/x"
           dd if=/dev/zero of="$TMPDIR/big" bs=1M count=4 2>/dev/null && echo fits
           true"#,
        &[],
        work.path(),
        read_only(),
        &limits,
    );
    let printed = outcome.stdout.text_lossy();
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 4, "{outcome:?}");
    assert_eq!(&lines[1..], ["tmpfs", "700", "shm"], "{outcome:?}");
    let dir = Path::new(lines[0].trim_start_matches("dir="));
    assert!(!dir.exists(), "{} was left on the host", dir.display());
    assert_eq!(run_mounts(), mounts_before);

    // The same write fits with a larger cap.
    let larger = Limits {
        tmp_size: Some(16 << 20),
        ..limits
    };
    let outcome = sh(
        &executor,
        r#"dd if=/dev/zero of="$TMPDIR/big" bs=1M count=4 2>/dev/null && echo fits"#,
        &[],
        work.path(),
        read_only(),
        &larger,
    );
    assert_eq!(outcome.stdout.text_lossy(), "fits\n", "{outcome:?}");
}

#[test]
fn a_private_proc_hides_keys_and_kcore_and_makes_proc_sys_read_only() {
    let executor = executor();
    if !available("mount namespace", &executor.features().private_mounts) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let outcome = sh(
        &executor,
        r#"wc -c < /proc/keys
           [ -c /proc/keys ] && echo keys-masked
           [ -c /proc/timer_list ] && echo timer-list-masked
           grep -c . /proc/self/mountinfo > /dev/null && echo mountinfo
           awk '$5 == "/proc/sys" { print $6 }' /proc/self/mountinfo | cut -d, -f1
           awk '$5 == "/sys" { print $6 }' /proc/self/mountinfo | cut -d, -f1
           awk '$5 == "/" { print $6 }' /proc/self/mountinfo | tr ',' '\n' | grep -c 'nodev\|nosuid'"#,
        &[],
        work.path(),
        mounts_only(),
        &limits(),
    );
    assert_eq!(
        outcome.stdout.text_lossy(),
        if Path::new("/proc/timer_list").exists() {
            "0\nkeys-masked\ntimer-list-masked\nmountinfo\nro\nro\n2\n"
        } else {
            "0\nkeys-masked\nmountinfo\nro\nro\n2\n"
        },
        "{outcome:?}"
    );
}

#[test]
fn nested_cgroups_a_program_makes_are_removed_with_its_leaf() {
    let executor = executor();
    if !root("nested_cgroups_a_program_makes_are_removed_with_its_leaf")
        || !available("cgroup.kill", &executor.features().cgroup_kill)
    {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    // Without a mount namespace the cgroup filesystems are writable: the
    // program makes cgroups inside its leaf and moves itself into one.
    let outcome = sh(
        &executor,
        r#"u=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
           d=/sys/fs/cgroup/unified$u/nested/deeper
           mkdir -p "$d" && echo "$d"
           p=$(awk -F: '$2 == "pids" { print $3 }' /proc/self/cgroup)
           e=/sys/fs/cgroup/pids$p/nested
           [ -d /sys/fs/cgroup/pids$p ] && mkdir "$e" && echo "$e" && echo $$ > "$e/cgroup.procs"
           true"#,
        &[],
        work.path(),
        Sandbox::none(),
        &limits(),
    );
    let printed = outcome.stdout.text_lossy();
    let made: Vec<&str> = printed.lines().collect();
    assert!(!made.is_empty(), "{outcome:?}");
    // The executor's keeper thread removes a used leaf just after its run returns (off the
    // call's path), nested directories included: wait for that, bounded.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for dir in made {
        while Path::new(dir).exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!Path::new(dir).exists(), "{dir} outlived the run");
    }

    // With the mount namespace, the program cannot make them at all.
    let outcome = sh(
        &executor,
        r#"u=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
           mkdir /sys/fs/cgroup/unified$u/nested 2>/dev/null && echo made
           true"#,
        &[],
        work.path(),
        mounts_only(),
        &limits(),
    );
    assert_eq!(outcome.stdout.text_lossy(), "", "{outcome:?}");
}

/// Issue 26: a run's own directory is writable under every filesystem restriction, is made
/// when missing, and its siblings (the other tools' caches) are out of sight, with nothing
/// left mounted on the host. Checked from outside: the file the run wrote, the sibling's
/// untouched secret.
#[test]
fn an_own_dir_is_writable_everywhere_and_hides_its_siblings() {
    let executor = executor();
    if !available("a mount namespace", &executor.features().private_mounts)
        || !available("Landlock", &executor.features().landlock)
    {
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let caches = temp.path().join("caches");
    let sibling = caches.join("other");
    std::fs::create_dir_all(&sibling).unwrap();
    std::fs::write(sibling.join("secret"), "s3cret").unwrap();
    let own = caches.join("mine");
    let script = r#"
echo written > "$1/file" && echo "wrote own"
ls -A "$2" 2>/dev/null | grep -v -x mine | sed 's/^/sees: /'
cat "$2/other/secret" 2>/dev/null && echo "read the sibling"
echo planted > "$2/other/planted" 2>/dev/null && echo "planted"
true
"#;
    for (name, base) in [
        ("full", mounts_only()),
        ("project", project(temp.path(), Vec::new())),
        ("read-only", read_only()),
    ] {
        let _ = std::fs::remove_dir_all(&own);
        let before = run_mounts();
        let outcome = sh(
            &executor,
            script,
            &[own.as_os_str(), caches.as_os_str()],
            Path::new("/"),
            Sandbox {
                own_dir: Some(own.clone()),
                ..base
            },
            &limits(),
        );
        let stdout = outcome.stdout.text_lossy();
        assert_eq!(
            stdout,
            "wrote own\n",
            "{name}: {stdout} {:?}",
            outcome.stderr.text_lossy()
        );
        assert_eq!(
            std::fs::read_to_string(own.join("file")).unwrap(),
            "written\n"
        );
        assert!(!sibling.join("planted").exists(), "{name}");
        assert_eq!(run_mounts(), before, "{name}");
    }
    let stdout = sh(
        &executor,
        script,
        &[own.as_os_str(), caches.as_os_str()],
        Path::new("/"),
        mounts_only(),
        &limits(),
    )
    .stdout
    .text_lossy();
    assert!(
        stdout.contains("read the sibling"),
        "without own_dir the sibling is in sight (the test can fail): {stdout}"
    );
    std::fs::remove_file(sibling.join("planted")).unwrap();
}

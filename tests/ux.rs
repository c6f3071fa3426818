//! The feel of the command line: help with examples, colour (and `NO_COLOR`), aligned tables, one-line errors with hints, completions.

use std::process::Command;

use crate::context::TestContext;

#[test]
fn help_without_color() {
    let context = TestContext::new();
    cli_snapshot!(context, context.command().args(["--color", "never", "--help"]), @r#"
    exit_code: 0
    ----- stdout -----
    Custom tools for AI agent pipelines: discover, validate, run isolated

    Usage: toolsmith [OPTIONS] <COMMAND>

    Commands:
      list         List the tools that may be called, grouped by directory
      show         Show one tool: its schema, annotations, where it lives, its effective limits and what policy says about it
      validate     Run every check discovery applies to tool files, one line each
      run          Call a tool and print its result envelope
      export       Print the tool definitions in one LLM API's exact shape (MCP, OpenAI, Anthropic, Gemini); a tool a provider cannot take is left out with a warning
      doctor       Check this machine and set-up: what the kernel allows, the tool directories and their problems, and the effective config, each with a fix
      serve        Serve the tools over MCP: on stdin/stdout until stdin closes, or over HTTP with `--http`
      completions  Print a shell completion script on stdout
      token        Mint the bearer token of `serve --http`
      generate     Generate a tool from a custom_tool request: render it, test it in the sandbox, and register it only when every check passes
      new          Write a working skeleton of a new tool, for a human to complete
      test         Run the test cases tools declare (`tests`), one line per case
      learn        Learn the narrowest sandbox declaration under which a tool's tests pass
      prepare      Fetch the dependencies of uv and npx tools into their caches, once
      history      List the recorded versions of a generated tool
      rollback     Restore a recorded version of a generated tool, as a new version
      trust        Trust a project: toolsmith then reads its tools and its config (until the config changes), or list the trusted directories
      untrust      Stop trusting a project: its tools and config are skipped again
      help         Print this message or the help of the given subcommand(s)

    Options:
          --tools-dir <DIR>      A directory to discover tools in; repeat it for several, later ones shadowing earlier ones. Replaces the default layers (system, user, project, `[discovery] dirs`): exactly these directories are read
          --project <DIR>        The project directory, whose `.toolsmith/` is read once trusted and where `filesystem = "project"` tools may write [env: TOOLSMITH_PROJECT] [default: the enclosing git work tree, else the current directory; never $HOME or / unless named]
          --config <FILE>        The TOML config file, above the user's [default: ./.toolsmith/config.toml if it exists and the project is trusted]
          --no-cache             Probe every tool instead of reusing the discovery cache (which is then neither read nor written)
          --color <WHEN>         When to colour the output: `auto` colours a terminal only, and not when NO_COLOR is set (CLICOLOR_FORCE=1 forces it) [default: auto] [possible values: auto, always, never]
          --log-format <FORMAT>  How logs are written on stderr: `text`, or `json` (one JSON object per line: timestamp, level, target, fields) [env: TOOLSMITH_LOG_FORMAT] [default: text] [possible values: text, json]
      -h, --help                 Print help
      -V, --version              Print version

    Examples:
      toolsmith list                                    the tools of the default directories
      toolsmith --tools-dir examples/tools list         the tools of one directory only
      toolsmith run hello --input '{"name": "Ada"}'       call a tool, print its envelope
      toolsmith doctor                                  what this machine allows, what is wrong

    Each subcommand has examples: toolsmith help SUBCOMMAND.
    Docs: docs/README.md (tool authors, operators, agent integration, migration).
    ----- stderr -----
    "#);
}

#[test]
fn help_with_color() {
    let context = TestContext::new();
    cli_snapshot!(context, context.command().args(["--color", "always", "run", "--help"]), @r#"
    exit_code: 0
    ----- stdout -----
    Call a tool and print its result envelope

    [ESC][1m[ESC][4mUsage:[ESC][0m [ESC][1mtoolsmith run[ESC][0m [OPTIONS] <NAME>

    [ESC][1m[ESC][4mArguments:[ESC][0m
      <NAME>
              The tool, as `hello` or `custom_tool_hello`

    [ESC][1m[ESC][4mOptions:[ESC][0m
          [ESC][1m--input[ESC][0m <JSON|-|@FILE>
              The arguments as JSON, `-` to read them from stdin, or `@FILE` to read them from a file

              [default: {}]

          [ESC][1m--timeout[ESC][0m <DUR>
              Wall-clock timeout, e.g. `30s`, `500ms`, `2m`

          [ESC][1m--cpu[ESC][0m <DUR>
              CPU time limit, e.g. `10s`, or `unlimited`

          [ESC][1m--memory[ESC][0m <SIZE>
              Memory limit, e.g. `512MiB`, `1GiB`, or `unlimited`

          [ESC][1m--max-output[ESC][0m <SIZE>
              Bytes kept per output stream, e.g. `64KiB`

          [ESC][1m--tmp-size[ESC][0m <SIZE>
              Size of the private TMPDIR (a tmpfs) under `filesystem = "project"` or `"read-only"`, e.g. `64MiB`, or `unlimited` (half of RAM)

          [ESC][1m--cwd[ESC][0m <DIR>
              The directory the tool runs in [default: the current directory]

          [ESC][1m--profile[ESC][0m <PROFILE>
              The policy profile: a tool it denies is POLICY_DENIED and is not run [env: TOOLSMITH_PROFILE] [default: `[policy] profile`]

              Possible values:
              - [ESC][1mplan[ESC][0m:       Only tools that declare themselves read-only
              - [ESC][1munattended[ESC][0m: Only tools that never need approval
              - [ESC][1mnone[ESC][0m:       No profile, even if the config or environment sets one

          [ESC][1m--json[ESC][0m
              Accepted for symmetry with other subcommands: the envelope is always JSON

          [ESC][1m--tools-dir[ESC][0m <DIR>
              A directory to discover tools in; repeat it for several, later ones shadowing earlier ones. Replaces the default layers (system, user, project, `[discovery] dirs`): exactly these directories are read

          [ESC][1m--project[ESC][0m <DIR>
              The project directory, whose `.toolsmith/` is read once trusted and where `filesystem = "project"` tools may write [env: TOOLSMITH_PROJECT] [default: the enclosing git work tree, else the current directory; never $HOME or / unless named]

          [ESC][1m--config[ESC][0m <FILE>
              The TOML config file, above the user's [default: ./.toolsmith/config.toml if it exists and the project is trusted]

          [ESC][1m--no-cache[ESC][0m
              Probe every tool instead of reusing the discovery cache (which is then neither read nor written)

          [ESC][1m--color[ESC][0m <WHEN>
              When to colour the output: `auto` colours a terminal only, and not when NO_COLOR is set (CLICOLOR_FORCE=1 forces it)

              [default: auto]
              [possible values: auto, always, never]

          [ESC][1m--log-format[ESC][0m <FORMAT>
              How logs are written on stderr: `text`, or `json` (one JSON object per line: timestamp, level, target, fields) [env: TOOLSMITH_LOG_FORMAT] [default: text]

              [possible values: text, json]

      [ESC][1m-h[ESC][0m, [ESC][1m--help[ESC][0m
              Print help (see a summary with '-h')

    Examples:
      toolsmith run hello --input '{"name": "Ada"}'
      echo '{"name": "Ada"}' | toolsmith run hello --input -
      toolsmith run word_count --input @args.json --timeout 5s --memory 256MiB

    Exit status: 0 when tool_success is true, 1 when it is false, 2 for bad usage.
    ----- stderr -----
    "#);
}

#[test]
fn every_subcommand_help_has_examples() {
    let context = TestContext::new();
    for subcommand in [
        "list",
        "show",
        "validate",
        "run",
        "export",
        "doctor",
        "serve",
        "completions",
        "trust",
        "untrust",
        "learn",
    ] {
        let output = context
            .command()
            .args([subcommand, "--help"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{subcommand}");
        let stdout = String::from_utf8(output.stdout).unwrap();
        let examples = stdout
            .split_once("Examples:\n")
            .unwrap_or_else(|| panic!("`{subcommand} --help` has no examples:\n{stdout}"))
            .1;
        assert!(
            examples.contains(&format!("toolsmith {subcommand}"))
                || examples.contains(&format!(" {subcommand} ")),
            "the examples of `{subcommand}` do not use it:\n{examples}"
        );
    }
}

#[test]
fn list_without_color() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["--color", "never", "list"]), @"
    exit_code: 0
    ----- stdout -----
    [EXAMPLES]:
      NAME        KIND      DESCRIPTION
      error_tool  kodelet   A tool that demonstrates error handling: fails on request
      git_info    kodelet   Get git repository information: current branch, HEAD commit and the number of uncommitted changes
      hello       kodelet   Say hello to a person
      word_count  manifest  Count the lines, words and bytes of a file in the project, or only the lines.
      word_stats  ikigai    Count the words, lines and characters of a text
    ----- stderr -----
    ");
}

#[test]
fn list_with_color() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["--color", "always", "list"]), @"
    exit_code: 0
    ----- stdout -----
    [ESC][1m[EXAMPLES]:[ESC][0m
      [ESC][1mNAME[ESC][0m        [ESC][1mKIND[ESC][0m      [ESC][1mDESCRIPTION[ESC][0m
      [ESC][36merror_tool[ESC][0m  kodelet   A tool that demonstrates error handling: fails on request
      [ESC][36mgit_info[ESC][0m    kodelet   Get git repository information: current branch, HEAD commit and the number of uncommitted changes
      [ESC][36mhello[ESC][0m       kodelet   Say hello to a person
      [ESC][36mword_count[ESC][0m  manifest  Count the lines, words and bytes of a file in the project, or only the lines.
      [ESC][36mword_stats[ESC][0m  ikigai    Count the words, lines and characters of a text
    ----- stderr -----
    ");
}

#[test]
fn show_without_color() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["--color", "never", "show", "word_count"]), @r#"
    exit_code: 0
    ----- stdout -----
    name:          word_count
    exposed name:  custom_tool_word_count
    kind:          manifest
    description:   Count the lines, words and bytes of a file in the project, or only the lines.
    path:          [EXAMPLES]/word-count.md
    source:        [EXAMPLES]
    annotations:   approval never, read_only true
    policy:        allowed
    sandbox:       network deny-if-possible, filesystem project-if-possible, syscalls filter
    isolation:     [ISOLATION]
    limits:
      timeout         10s (requested 10s by the tool, ceiling 5m)
      grace           2s
      cpu             unlimited
      memory          1GiB
      max_processes   256
      max_file_size   1GiB
      max_open_files  1024
      max_output      1MiB
      tmp_size        64MiB
    input schema:
      {
        "type": "object",
        "properties": {
          "path": {
            "type": "string",
            "description": "The file, relative to the project directory",
            "minLength": 1
          },
          "lines_only": {
            "type": "boolean",
            "description": "Count only the lines",
            "default": false
          }
        },
        "required": [
          "path"
        ]
      }
    output schema: none
    tests:
      no path: input {"path":""}, expect {"error_code":"INVALID_PARAMS"}
      a missing file: input {"path":"no-such-file","lines_only":true}, expect {"result_contains":"no-such-file"}
    ----- stderr -----
    "#);
}

#[test]
fn show_with_color() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["--color", "always", "show", "word_count"]), @r#"
    exit_code: 0
    ----- stdout -----
    [ESC][1mname:[ESC][0m          [ESC][36mword_count[ESC][0m
    [ESC][1mexposed name:[ESC][0m  custom_tool_word_count
    [ESC][1mkind:[ESC][0m          manifest
    [ESC][1mdescription:[ESC][0m   Count the lines, words and bytes of a file in the project, or only the lines.
    [ESC][1mpath:[ESC][0m          [EXAMPLES]/word-count.md
    [ESC][1msource:[ESC][0m        [EXAMPLES]
    [ESC][1mannotations:[ESC][0m   approval never, read_only true
    [ESC][1mpolicy:[ESC][0m        [ESC][32mallowed[ESC][0m
    [ESC][1msandbox:[ESC][0m       network deny-if-possible, filesystem project-if-possible, syscalls filter
    [ESC][1misolation:[ESC][0m     [ISOLATION]
    [ESC][1mlimits:[ESC][0m
      timeout         10s (requested 10s by the tool, ceiling 5m)
      grace           2s
      cpu             unlimited
      memory          1GiB
      max_processes   256
      max_file_size   1GiB
      max_open_files  1024
      max_output      1MiB
      tmp_size        64MiB
    [ESC][1minput schema:[ESC][0m
      {
        "type": "object",
        "properties": {
          "path": {
            "type": "string",
            "description": "The file, relative to the project directory",
            "minLength": 1
          },
          "lines_only": {
            "type": "boolean",
            "description": "Count only the lines",
            "default": false
          }
        },
        "required": [
          "path"
        ]
      }
    [ESC][1moutput schema:[ESC][0m none
    [ESC][1mtests:[ESC][0m
      no path: input {"path":""}, expect {"error_code":"INVALID_PARAMS"}
      a missing file: input {"path":"no-such-file","lines_only":true}, expect {"result_contains":"no-such-file"}
    ----- stderr -----
    "#);
}

/// The kernel section depends on the machine; the rest is the same everywhere.
fn doctor_filters(text: String) -> String {
    let mut kept = Vec::new();
    let mut in_kernel = false;
    for line in text.lines() {
        if line.contains("kernel:") {
            in_kernel = true;
            kept.push("[KERNEL SECTION]".to_owned());
            continue;
        }
        if in_kernel {
            if line.is_empty() {
                in_kernel = false;
            } else {
                continue;
            }
        }
        let line = match line.split_once("backend:") {
            Some((before, after)) if !line.contains("executor.backend") => {
                let rest = after.split_once(" (").map_or("", |(_, rest)| rest);
                format!("{before}backend:[BACKEND] ({rest}")
            }
            _ => line.to_owned(),
        };
        kept.push(line);
    }
    kept.join("\n") + "\n"
}

#[test]
fn doctor_with_a_problem_without_color() {
    let context = TestContext::new();
    context.tool("Bad-Name", "#!/bin/sh\n");
    context.tool("script", "#!/bin/sh\n");
    std::fs::set_permissions(
        context.tools.join("script"),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    context.project_file(
        ".toolsmith/config.toml",
        "[limits]\ntimeout = \"10s\"\n[discovery]\ncache = false\n",
    );
    let rendered = doctor_filters(
        context.render(
            context
                .with_tools()
                .env("TOOLSMITH_MEMORY", "256MiB")
                .args(["--color", "never", "doctor"]),
        ),
    );
    context
        .insta_settings()
        .bind(|| insta::assert_snapshot!(rendered, @r#"
        exit_code: 1
        ----- stdout -----
        backend:[BACKEND] (auto: the strongest this kernel allows)

        [KERNEL SECTION]

        sandbox: profile = default, network = declared, filesystem = project-if-possible, generated tools' network = none (project: [TEMP]/project, the current directory)
          network namespace       ok  network = deny: new network namespaces (as root)
          landlock                ok  filesystem = project | read-only: Landlock ABI 7
          private /proc           ok  tools see no other process, toolsmith's environment included: new PID and mount namespaces with a fresh /proc (as root)
          mount namespace         ok  read-only /sys and cgroups, a minimal /dev, nodev mounts, and under project | read-only read-only mounts, protected paths and a capped tmpfs TMPDIR: a mount namespace with read-only, nodev mounts, a minimal /dev, a tmpfs TMPDIR and a masked /proc (as root)
          ipc and uts namespaces  ok  SysV objects and POSIX queues die with each call, the host's stay out of sight: new IPC and UTS namespaces (as root)
          seccomp                 ok  syscalls = filter (keyrings, bpf, mounts, namespaces, ptrace, modules, ... denied): a seccomp filter can be installed
          read-mask server        ok  a tool's attempts to read a masked path (~/.ssh, ~/.aws, toolsmith's state) are reported as `kind: "read"` denials naming the `read_reveal` to add; without it the masks hide the same, silently: a detached FUSE mount serves the read masks and records what runs try
          seccomp supervisor      ok  network = ["unix:/path"] grants, and no new repository (.git, HEAD) or absent protected path made at any depth of a writable root; without it Unix socket grants fail closed and an absent protected path's directory is sealed against every new entry: seccomp user notifications, pidfd_getfd and openat2
          secrets: private-proc (every call has its own PID namespace and /proc; also toolsmith's initial environment was blanked at start)
          probes: network deny, filesystem read-only, own PID namespace, whatever the settings above
          read masks: every home's credentials and toolsmith's own state hidden from every tool under every profile (`read_reveal` shows a path; docs/security.md, "Read masks")
          privileges: tools run as root (uid 0) with no capability and an empty bounding set; root-owned files stay writable to them: set [sandbox] user to run them as another uid
          toolsmith's memory: not dumpable (no tool can open /proc/<toolsmith>/mem); 0 variables no tool receives were dropped from its environment

        tool directories (--tools-dir, lowest precedence first):
          explicit  ok  [TEMP]/tools (0 tools)

        problems (2):
          [TEMP]/tools/Bad-Name  problem  file name is not a valid tool name: tool name `Bad-Name` must start with a lowercase letter
            fix: rename [TEMP]/tools/Bad-Name: lower-case letters, digits and `_` (`-` is read as `_`), starting with a letter
          [TEMP]/tools/script    problem  it starts with `#!` but is not executable (chmod +x it)
            fix: chmod +x [TEMP]/tools/script

        interpreters (what the tools run with):
          /bin/sh  ok  found (2 tools: [TEMP]/tools/Bad-Name, [TEMP]/tools/script)

        project trust:
          [TEMP]/project  ok  trusted by [trust] paths ([TEMP]/project)

        user config: [TEMP]/home/.config/toolsmith/config.toml
        config file: ./.toolsmith/config.toml
          KEY                      VALUE                          FROM
          limits.timeout           10s                            config file
          limits.grace             2s                             default
          limits.cpu               unlimited                      default
          limits.memory            256MiB                         env TOOLSMITH_MEMORY
          limits.max_output        1MiB                           default
          limits.max_timeout       5m                             default
          limits.max_processes     256                            default
          limits.max_file_size     1GiB                           default
          limits.max_open_files    1024                           default
          limits.tmp_size          64MiB                          default
          env.allow                ["PATH","HOME","USER","LANG"]  default
          env.set                  {}                             default
          executor.backend         auto                           default
          executor.max_concurrent  none                           default
          policy.disabled          none                           default
          policy.allowed           none                           default
          policy.profile           none                           default
          sandbox.profile          default                        default
          generator.network        none                           default
          sandbox.network          declared                       default
          sandbox.filesystem       project-if-possible            default
          sandbox.syscalls         filter                         default
          sandbox.user             none                           default
          audit.path               none                           default
          discovery.peers          false                          default
          discovery.cache          false                          config file
          discovery.dirs           []                             flag --tools-dir

        discovery cache: off

        2 problems found
        ----- stderr -----
        "#));
}

#[test]
fn doctor_with_color() {
    let context = TestContext::new();
    let rendered = doctor_filters(
        context.render(
            context
                .with_examples()
                .args(["--color", "always", "doctor"]),
        ),
    );
    context
        .insta_settings()
        .bind(|| insta::assert_snapshot!(rendered, @r#"
        exit_code: 0
        ----- stdout -----
        [ESC][1mbackend:[BACKEND] (auto: the strongest this kernel allows)

        [KERNEL SECTION]

        [ESC][1msandbox:[ESC][0m profile = default, network = declared, filesystem = project-if-possible, generated tools' network = none (project: [TEMP]/project, the current directory)
          network namespace       [ESC][32mok[ESC][0m  network = deny: new network namespaces (as root)
          landlock                [ESC][32mok[ESC][0m  filesystem = project | read-only: Landlock ABI 7
          private /proc           [ESC][32mok[ESC][0m  tools see no other process, toolsmith's environment included: new PID and mount namespaces with a fresh /proc (as root)
          mount namespace         [ESC][32mok[ESC][0m  read-only /sys and cgroups, a minimal /dev, nodev mounts, and under project | read-only read-only mounts, protected paths and a capped tmpfs TMPDIR: a mount namespace with read-only, nodev mounts, a minimal /dev, a tmpfs TMPDIR and a masked /proc (as root)
          ipc and uts namespaces  [ESC][32mok[ESC][0m  SysV objects and POSIX queues die with each call, the host's stay out of sight: new IPC and UTS namespaces (as root)
          seccomp                 [ESC][32mok[ESC][0m  syscalls = filter (keyrings, bpf, mounts, namespaces, ptrace, modules, ... denied): a seccomp filter can be installed
          read-mask server        [ESC][32mok[ESC][0m  a tool's attempts to read a masked path (~/.ssh, ~/.aws, toolsmith's state) are reported as `kind: "read"` denials naming the `read_reveal` to add; without it the masks hide the same, silently: a detached FUSE mount serves the read masks and records what runs try
          seccomp supervisor      [ESC][32mok[ESC][0m  network = ["unix:/path"] grants, and no new repository (.git, HEAD) or absent protected path made at any depth of a writable root; without it Unix socket grants fail closed and an absent protected path's directory is sealed against every new entry: seccomp user notifications, pidfd_getfd and openat2
          secrets: [ESC][36mprivate-proc[ESC][0m (every call has its own PID namespace and /proc; also toolsmith's initial environment was blanked at start)
          probes: network deny, filesystem read-only, own PID namespace, whatever the settings above
          read masks: every home's credentials and toolsmith's own state hidden from every tool under every profile (`read_reveal` shows a path; docs/security.md, "Read masks")
          privileges: tools run as root (uid 0) with no capability and an empty bounding set; root-owned files stay writable to them: set [sandbox] user to run them as another uid
          toolsmith's memory: not dumpable (no tool can open /proc/<toolsmith>/mem); 0 variables no tool receives were dropped from its environment

        [ESC][1mtool directories (--tools-dir, lowest precedence first):[ESC][0m
          explicit  [ESC][32mok[ESC][0m  [EXAMPLES] (5 tools)

        [ESC][1mproblems:[ESC][0m none

        [ESC][1minterpreters (what the tools run with):[ESC][0m
          bash     [ESC][32mok[ESC][0m  found (1 tool: git_info)
          python3  [ESC][32mok[ESC][0m  found (3 tools: error_tool, hello, word_stats)
          sh       [ESC][32mok[ESC][0m  found (1 tool: word_count)

        [ESC][1muser config:[ESC][0m none ($TOOLSMITH_HOME/config.toml, default ~/.config/toolsmith/config.toml; docs/config.md lists every key)
        [ESC][1mconfig file:[ESC][0m none (a trusted project's .toolsmith/config.toml, or --config FILE)
          [ESC][1mKEY[ESC][0m                      [ESC][1mVALUE[ESC][0m                          [ESC][1mFROM[ESC][0m
          limits.timeout           30s                            [ESC][2mdefault[ESC][0m
          limits.grace             2s                             [ESC][2mdefault[ESC][0m
          limits.cpu               unlimited                      [ESC][2mdefault[ESC][0m
          limits.memory            1GiB                           [ESC][2mdefault[ESC][0m
          limits.max_output        1MiB                           [ESC][2mdefault[ESC][0m
          limits.max_timeout       5m                             [ESC][2mdefault[ESC][0m
          limits.max_processes     256                            [ESC][2mdefault[ESC][0m
          limits.max_file_size     1GiB                           [ESC][2mdefault[ESC][0m
          limits.max_open_files    1024                           [ESC][2mdefault[ESC][0m
          limits.tmp_size          64MiB                          [ESC][2mdefault[ESC][0m
          env.allow                ["PATH","HOME","USER","LANG"]  [ESC][2mdefault[ESC][0m
          env.set                  {}                             [ESC][2mdefault[ESC][0m
          executor.backend         auto                           [ESC][2mdefault[ESC][0m
          executor.max_concurrent  none                           [ESC][2mdefault[ESC][0m
          policy.disabled          none                           [ESC][2mdefault[ESC][0m
          policy.allowed           none                           [ESC][2mdefault[ESC][0m
          policy.profile           none                           [ESC][2mdefault[ESC][0m
          sandbox.profile          default                        [ESC][2mdefault[ESC][0m
          generator.network        none                           [ESC][2mdefault[ESC][0m
          sandbox.network          declared                       [ESC][2mdefault[ESC][0m
          sandbox.filesystem       project-if-possible            [ESC][2mdefault[ESC][0m
          sandbox.syscalls         filter                         [ESC][2mdefault[ESC][0m
          sandbox.user             none                           [ESC][2mdefault[ESC][0m
          audit.path               none                           [ESC][2mdefault[ESC][0m
          discovery.peers          false                          [ESC][2mdefault[ESC][0m
          discovery.cache          true                           [ESC][2mdefault[ESC][0m
          discovery.dirs           []                             [ESC][2mflag --tools-dir[ESC][0m

        [ESC][1mdiscovery cache:[ESC][0m [TEMP]/home/.cache/toolsmith/discovery.json

        [ESC][32mno problems found[ESC][0m
        ----- stderr -----
        "#));
}

#[test]
fn doctor_json_shape() {
    let context = TestContext::new();
    context.tool("script", "#!/bin/sh\n");
    std::fs::set_permissions(
        context.tools.join("script"),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let output = context
        .with_tools()
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert_eq!(report["problems"][0]["status"], "problem");
    assert_eq!(
        report["problems"][0]["fix"],
        format!("chmod +x {}", context.tools.join("script").display())
    );
    assert_eq!(report["directories"][0]["status"], "ok");
    let timeout = report["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|setting| setting["key"] == "limits.timeout")
        .unwrap();
    assert_eq!(timeout["value"], "30s");
    assert_eq!(timeout["origin"]["kind"], "default");
    for check in report["kernel"].as_array().unwrap() {
        assert!(
            ["ok", "warn"].contains(&check["status"].as_str().unwrap()),
            "{check}"
        );
    }
}

#[test]
fn errors_without_color() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["--color", "never", "show", "helo"]), @r#"
    exit_code: 1
    ----- stdout -----
    ----- stderr -----
    error: no tool named "helo" in the tool directories
    hint: did you mean `hello`?
    "#);
    cli_snapshot!(context, context.with_examples().args(["--color", "never", "run", "hello", "--input", "{\"name\": "]), @r#"
    exit_code: 2
    ----- stdout -----
    ----- stderr -----
    error: the input from --input is not valid JSON: EOF while parsing a value at line 1 column 9
    hint: pass a JSON object, e.g. --input '{"name": "Ada"}'
    "#);
    context.project_file(".toolsmith/config.toml", "[limits]\ntimeuot = \"1s\"\n");
    cli_snapshot!(context, context.command().args(["--color", "never", "list"]), @"
    exit_code: 2
    ----- stdout -----
    ----- stderr -----
    error: invalid config file ./.toolsmith/config.toml at line 2: unknown field `timeuot`, expected one of `timeout`, `grace`, `cpu`, `memory`, `max_processes`, `max_file_size`, `max_open_files`, `max_output`, `max_timeout`, `tmp_size`
    hint: the sections are [limits], [env], [executor], [policy], [sandbox], [tools.NAME], [audit], [discovery], [generator], [trust] and [secrets.NAME]; see the key list in the message
    ");
    cli_snapshot!(context, context.command().args(["--color", "never", "run", "hello", "--timeout", "soon"]), @"
    exit_code: 2
    ----- stdout -----
    ----- stderr -----
    error: invalid value 'soon' for '--timeout <DUR>': expected a duration such as `500ms`, `30s`, `2m` or `1h` (a plain number is seconds)

    For more information, try '--help'.
    ");
}

#[test]
fn errors_with_color() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["--color", "always", "show", "word-counter"]), @r#"
    exit_code: 1
    ----- stdout -----
    ----- stderr -----
    [ESC][1m[ESC][31merror:[ESC][0m no tool named "word-counter" in the tool directories
    [ESC][33mhint:[ESC][0m did you mean `word_count`?
    "#);
    cli_snapshot!(context, context.with_examples().args(["--color", "always", "run", "hello", "--input", "[1,"]), @r#"
    exit_code: 2
    ----- stdout -----
    ----- stderr -----
    [ESC][1m[ESC][31merror:[ESC][0m the input from --input is not valid JSON: EOF while parsing a value at line 1 column 3
    [ESC][33mhint:[ESC][0m pass a JSON object, e.g. --input '{"name": "Ada"}'
    "#);
}

#[test]
fn no_color_beats_clicolor_force_in_auto_mode() {
    let context = TestContext::new();
    let forced = context
        .with_examples()
        .env("CLICOLOR_FORCE", "1")
        .arg("list")
        .output()
        .unwrap();
    assert!(
        forced.stdout.contains(&0x1b),
        "CLICOLOR_FORCE=1 colours a pipe"
    );
    let plain = context
        .with_examples()
        .env("CLICOLOR_FORCE", "1")
        .env("NO_COLOR", "1")
        .arg("list")
        .output()
        .unwrap();
    assert!(
        !plain.stdout.contains(&0x1b),
        "NO_COLOR wins over CLICOLOR_FORCE"
    );
    let always = context
        .with_examples()
        .env("NO_COLOR", "1")
        .args(["--color=always", "list"])
        .output()
        .unwrap();
    assert!(
        always.stdout.contains(&0x1b),
        "--color always beats NO_COLOR"
    );
}

#[test]
fn completions_for_every_shell() {
    let context = TestContext::new();
    for (shell, marker) in [
        ("bash", "_toolsmith()"),
        ("zsh", "#compdef toolsmith"),
        ("fish", "complete -c toolsmith"),
        ("elvish", "edit:completion:arg-completer[toolsmith]"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let output = context
            .command()
            .args(["completions", shell])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{shell}");
        let script = String::from_utf8(output.stdout).unwrap();
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("doctor"), "{shell} completes subcommands");
    }
    cli_snapshot!(context, context.command().args(["completions", "tcsh"]), @"
    exit_code: 2
    ----- stdout -----
    ----- stderr -----
    error: invalid value 'tcsh' for '<SHELL>'
      [possible values: bash, elvish, fish, powershell, zsh]

      tip: a similar value exists: 'zsh'

    For more information, try '--help'.
    ");
}

#[test]
fn bash_completion_script_is_valid_bash() {
    let context = TestContext::new();
    let output = context
        .command()
        .args(["completions", "bash"])
        .output()
        .unwrap();
    let script = context.root.join("toolsmith.bash");
    std::fs::write(&script, &output.stdout).unwrap();
    #[expect(
        clippy::disallowed_methods,
        reason = "bash checks the syntax of the generated script"
    )]
    let check = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

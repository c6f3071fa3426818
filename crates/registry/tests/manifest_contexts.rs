//! Manifest injection (issue 12): a hostile value in every shell context a template can put a
//! tag in, under bash and under sh (dash here), through discovery and a real call. Each
//! context is either refused at load time (with line, column and reason) or runs without
//! the value ever executing: no marker file appears.
//!
//! The contexts of the issue's "Why" come first; all of them executed a value (or loaded a
//! manifest that would) before values were passed out of band.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use toolsmith_executor::{BackendChoice, Executor, ExecutorConfig, Limits, filtered_env};
use toolsmith_registry::{Policy, RunConfig, SandboxSettings, Toolsmith};

/// What a context must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Loads, and no value runs.
    Safe,
    /// Refused at load time; the message names this reason.
    Refused(&'static str),
}

use Expect::{Refused, Safe};

/// Which shells a case runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shells {
    Both,
    Bash,
}

struct Case {
    body: &'static str,
    kind: &'static str,
    shells: Shells,
    expect: Expect,
}

const fn case(body: &'static str, expect: Expect) -> Case {
    Case {
        body,
        kind: "string",
        shells: Shells::Both,
        expect,
    }
}

const fn bash(body: &'static str, expect: Expect) -> Case {
    Case {
        body,
        kind: "string",
        shells: Shells::Bash,
        expect,
    }
}

const BACKSLASH: Expect = Refused("backslash");
const ARITHMETIC: Expect = Refused("arithmetic");
const NAME: Expect = Refused("variable name");
const CODE: Expect = Refused("run as code");
const HEREDOC: Expect = Refused("here-document");

/// The contexts of the issue's "Why" (finding 3).
const WHY: &[Case] = &[
    case("echo \\{{ v }}\n", BACKSLASH),
    case("echo \"\\{{ v }}\"\n", BACKSLASH),
    case("echo `echo {{ v }}`\n", Safe),
    case("echo \"`echo {{ v }}`\"\n", Safe),
    case("echo \"`printf '%s' \"{{ v }}\"`\"\n", Safe),
    case("# a comment with {{ v }} in it\necho done\n", Safe),
    case("echo done # {{ v }} don't\necho '{{ v }}'\n", Safe),
    case("echo \"${X:-\"{{ v }}\"}\"\n", Safe),
    case("echo \"a\nb\"#' {{ v }}'\n", Safe),
    case("echo $'\\'' {{ v }} '#'\n", Safe),
    bash("echo $(( {{ v }} + 1 ))\n", ARITHMETIC),
    bash("(( {{ v }} ))\n", ARITHMETIC),
    bash("[[ {{ v }} -gt 0 ]]\n", ARITHMETIC),
    bash("[[ -v {{ v }} ]]\n", ARITHMETIC),
    bash("let x={{ v }}\n", ARITHMETIC),
    bash("declare -i x={{ v }}\n", ARITHMETIC),
    bash("printf -v {{ v }} %s x\n", NAME),
];

/// Contexts of our own.
const OURS: &[Case] = &[
    case("echo {{ v }}\n", Safe),
    case("echo \"{{ v }}\"\n", Safe),
    case("echo '{{ v }}'\n", Safe),
    case("echo 'a'{{ v }}'b'\n", Safe),
    case("echo \"$(echo {{ v }})\"\n", Safe),
    case("echo $(echo \"{{ v }}\")\n", Safe),
    case("echo $( (echo {{ v }}) )\n", Safe),
    case("echo ${X:-{{ v }}}\n", Safe),
    case("echo \"${X:-'{{ v }}'}\"\n", Safe),
    case("echo ${X#{{ v }}}\n", Safe),
    case("x={{ v }}; echo \"$x\"\n", Safe),
    case("f() { echo \"$1\"; }; f {{ v }}\n", Safe),
    case("echo {{ v }} | cat\n", Safe),
    case("case {{ v }} in x) echo x;; esac\n", Safe),
    case("if [ -n \"{{ v }}\" ]; then echo y; fi\n", Safe),
    case("echo {{ v }}{{ v }}\n", Safe),
    case("echo \\\\{{ v }}\n", Safe),
    case("printf '%s\\n' \"a{{ v }}b\"\n", Safe),
    case("export X={{ v }}; sh -c 'echo \"$X\"'\n", Safe),
    case("sh -c 'echo \"$1\"' sh {{ v }}\n", Safe),
    case("echo \"`echo \\\"{{ v }}\\\"`\"\n", Safe),
    case("echo $( echo \"${X:-$(echo \"{{ v }}\")}\" )\n", Safe),
    case("cat <<EOF\n{{ v }}\nEOF\n", HEREDOC),
    case("cat <<'EOF'\n{{ v }}\nEOF\n", HEREDOC),
    case("eval \"echo {{ v }}\"\n", CODE),
    case("sh -c \"echo {{ v }}\"\n", CODE),
    case("trap \"echo {{ v }}\" EXIT\n", CODE),
    case("read {{ v }} <<EOF\nx\nEOF\n", NAME),
    case("unset {{ v }}\n", NAME),
    case("export {{ v }}=1\n", NAME),
    case("getopts a {{ v }}\n", NAME),
    bash("echo $'{{ v }}'\n", Safe),
    bash("cat <<< {{ v }}\n", Safe),
    bash("[[ {{ v }} == x ]] || echo no\n", Safe),
    bash("[[ x == {{ v }} && 1 -gt 0 ]] || echo no\n", Safe),
    bash("f() { local x={{ v }}; echo \"$x\"; }; f\n", Safe),
    bash("x=1; echo ${x:{{ v }}}\n", ARITHMETIC),
    bash("a=(1); echo ${a[{{ v }}]}\n", ARITHMETIC),
    bash("a[{{ v }}]=1\n", ARITHMETIC),
    bash("declare -a arr=([{{ v }}]=1)\n", ARITHMETIC),
    bash("echo $[ {{ v }} ]\n", ARITHMETIC),
    bash("for (( i={{ v }}; i<1; i++ )); do :; done\n", ARITHMETIC),
    bash("x=$(( 1 + $(echo {{ v }}) ))\n", ARITHMETIC),
    bash("[ -v {{ v }} ]\n", NAME),
    bash("test -v {{ v }}\n", NAME),
    bash("declare {{ v }}=1\n", NAME),
    bash("declare -n r={{ v }}\n", NAME),
    bash("mapfile {{ v }} < /dev/null\n", NAME),
    bash("wait -p {{ v }}\n", NAME),
    bash("bash -c 'echo {{ v }}'\n", CODE),
];

/// Hostile values; `M` is replaced by the marker's path.
const VALUES: &[&str] = &[
    "a[$(touch M)]",
    "$(touch M)",
    "`touch M`",
    "x'; touch M; '",
    "x\"; touch M; \"",
    "x\ntouch M\n",
    "\\'$(touch M)'\\",
    "x}\"; touch M; #",
];

struct Harness {
    executor: Arc<Executor>,
    dir: tempfile::TempDir,
}

impl Harness {
    fn new() -> Harness {
        Harness {
            executor: Arc::new(
                Executor::new(ExecutorConfig {
                    backend: BackendChoice::Auto,
                    max_concurrent: None,
                })
                .unwrap(),
            ),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn config(&self, tools: &Path) -> RunConfig {
        RunConfig {
            cwd: tools.to_path_buf(),
            env: filtered_env(&["PATH".to_owned()], &[]),
            limits: Limits::recommended(),
            max_timeout: std::time::Duration::from_secs(300),
            overrides: Default::default(),
            sandbox: SandboxSettings::unrestricted(),
            project_dir: tools.to_path_buf(),
            protected: Vec::new(),
            project_gate: None,
            tool_caches: None,
            read_masks: toolsmith_registry::ReadMasks::none(),
            secrets: Default::default(),
        }
    }

    /// Loads `case` under `shell`, then calls it with every hostile value; returns the
    /// failures as sentences.
    async fn check(&self, index: usize, case: &Case, shell: &str) -> Vec<String> {
        let tools = self.dir.path().join(format!("case{index}-{shell}"));
        fs::create_dir_all(&tools).unwrap();
        let manifest = format!(
            "---\nname: t\ndescription: A context\nshell: {shell}\nparameters:\n  v:\n    type: {}\n---\n{}",
            case.kind, case.body
        );
        fs::write(tools.join("t.md"), &manifest).unwrap();
        let config = self.config(&tools);
        let catalog = Toolsmith::from_parts(
            Arc::clone(&self.executor),
            config.clone(),
            Policy::allow_all(),
        )
        .discover(std::slice::from_ref(&tools))
        .await;
        let label = format!("{shell}: {:?}", case.body);
        match case.expect {
            Refused(reason) => {
                let Some(problem) = catalog.problems().first() else {
                    return vec![format!("{label}: loaded, expected a refusal ({reason})")];
                };
                let message = problem.message();
                let located = message.contains("line ") && message.contains(", column ");
                if !message.contains(reason) || !located {
                    return vec![format!(
                        "{label}: refused with {message:?}, expected the line, column and {reason:?}"
                    )];
                }
                Vec::new()
            }
            Safe => {
                if let Some(problem) = catalog.problems().first() {
                    return vec![format!("{label}: refused: {}", problem.message())];
                }
                let mut failures = Vec::new();
                for value in VALUES {
                    let marker = tools.join("M");
                    let value = value.replace('M', &marker.display().to_string());
                    let envelope = Toolsmith::from_parts(
                        Arc::clone(&self.executor),
                        config.clone(),
                        Policy::allow_all(),
                    )
                    .call(&catalog, "t", &json!({ "v": value }))
                    .await
                    .unwrap();
                    if marker.exists() {
                        failures.push(format!(
                            "{label}: value {value:?} ran: {}",
                            serde_json::to_value(&envelope).unwrap_or(Value::Null)
                        ));
                        fs::remove_file(&marker).unwrap();
                    }
                }
                failures
            }
        }
    }
}

async fn check_all(cases: &[Case]) {
    let harness = Harness::new();
    let mut failures = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        let shells: &[&str] = match case.shells {
            Shells::Both => &["bash", "sh"],
            Shells::Bash => &["bash"],
        };
        for shell in shells {
            failures.extend(harness.check(index, case, shell).await);
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn contexts_of_the_issue() {
    check_all(WHY).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn contexts_of_our_own() {
    assert!(OURS.len() >= 20);
    check_all(OURS).await;
}

/// Arithmetic contexts admit numeric parameters, whose values are plain numbers.
#[tokio::test(flavor = "multi_thread")]
async fn arithmetic_admits_numbers() {
    let harness = Harness::new();
    for (kind, body, argument, expect) in [
        ("integer", "echo $(( {{ v }} + 1 ))\n", json!(41), "42"),
        (
            "integer",
            "(( {{ v }} > 1 )) && echo big\n",
            json!(5),
            "big",
        ),
        (
            "integer",
            "[[ {{ v }} -gt 0 ]] && echo pos\n",
            json!(3),
            "pos",
        ),
        ("integer", "let x={{ v }}*2; echo $x\n", json!(4), "8"),
        ("number", "declare -i x={{ v }}; echo $x\n", json!(7), "7"),
        ("integer", "a=(x y z); echo ${a[{{ v }}]}\n", json!(2), "z"),
    ] {
        let tools = harness.dir.path().join(format!("numeric-{}", body.len()));
        fs::create_dir_all(&tools).unwrap();
        fs::write(
            tools.join("t.md"),
            format!(
                "---\nname: t\ndescription: Numbers\nshell: bash\nparameters:\n  v:\n    type: {kind}\n---\n{body}"
            ),
        )
        .unwrap();
        let config = harness.config(&tools);
        let catalog = Toolsmith::from_parts(
            Arc::clone(&harness.executor),
            config.clone(),
            Policy::allow_all(),
        )
        .discover(std::slice::from_ref(&tools))
        .await;
        assert!(catalog.problems().is_empty(), "{:?}", catalog.problems());
        let envelope = Toolsmith::from_parts(
            Arc::clone(&harness.executor),
            config.clone(),
            Policy::allow_all(),
        )
        .call(&catalog, "t", &json!({ "v": argument }))
        .await
        .unwrap();
        let envelope = serde_json::to_value(&envelope).unwrap();
        assert_eq!(envelope["result"], json!(expect), "{body}: {envelope}");
    }
}

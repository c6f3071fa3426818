//! `toolsmith validate`: every check, one line each, status 1 on any failure; and the progress bar stays off pipes.

use crate::context::{TestContext, examples_dir, shell_tool};

const EMPTY_SCHEMA: &str = r#"{"type": "object"}"#;

#[test]
fn good_tools_pass() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["validate", "hello"]).arg(examples_dir().join("git_info")), @"
    exit_code: 0
    ----- stdout -----
    [EXAMPLES]/hello (hello)
      ok is an executable file
      ok the file name is a valid tool name
      ok no other file in its directory provides the same tool
      ok `description` answered in time
      ok the `description` output is a JSON object with the required fields
      ok the declared name is a valid tool name
      ok the input schema is a valid JSON Schema for an object
      ok no output schema is declared (optional)
      ok the declared name matches the file name
      ok the description is not empty
      ok the timeout the tool asks for (`config`), if any, is valid
    [EXAMPLES]/git_info (git_info)
      ok is an executable file
      ok the file name is a valid tool name
      ok `description` answered in time
      ok the `description` output is a JSON object with the required fields
      ok the declared name is a valid tool name
      ok the input schema is a valid JSON Schema for an object
      ok no output schema is declared (optional)
      ok the declared name matches the file name
      ok the description is not empty
      ok the timeout the tool asks for (`config`), if any, is valid
    2 files checked, 0 failed
    ----- stderr -----
    ");
}

#[test]
fn every_directory_file_with_failures() {
    let context = TestContext::new();
    context.tool("good", &shell_tool("good", EMPTY_SCHEMA, "true"));
    context.tool("misnamed", &shell_tool("other", EMPTY_SCHEMA, "true"));
    context.tool(
        "bad-schema",
        &shell_tool(
            "bad_schema",
            r#"{"type": "object", "properties": {"a": {"type": 5}}}"#,
            "true",
        ),
    );
    context.tool("Bad.Name", &shell_tool("bad", EMPTY_SCHEMA, "true"));
    cli_snapshot!(context, context.with_tools().arg("validate"), @"
    exit_code: 1
    ----- stdout -----
    [TEMP]/tools/Bad.Name
      ok is an executable file
      FAIL the file name is a valid tool name: file name is not a valid tool name: tool name `Bad.Name` must start with a lowercase letter
      skip no other file in its directory provides the same tool (not checked: an earlier check failed)
      skip the tool describes itself (not checked: an earlier check failed)
      skip the description parses (not checked: an earlier check failed)
      skip the declared name is a valid tool name (not checked: an earlier check failed)
      skip the input schema is a valid JSON Schema for an object (not checked: an earlier check failed)
      skip the output schema is a valid JSON Schema (not checked: an earlier check failed)
      skip the declared name matches the file name (not checked: an earlier check failed)
      skip the description is not empty (not checked: an earlier check failed)
      skip the timeout the tool asks for (`config`), if any, is valid (not checked: an earlier check failed)
    [TEMP]/tools/bad-schema (bad_schema)
      ok is an executable file
      ok the file name is a valid tool name
      ok no other file in its directory provides the same tool
      ok `description` answered in time
      ok the `description` output is a JSON object with the required fields
      ok the declared name is a valid tool name
      FAIL the input schema is a valid JSON Schema for an object: invalid `description` output: field `input_schema` is invalid: the schema is not valid JSON Schema: /properties/a/type: expected a JSON Schema type name (array, boolean, integer, null, number, object or string), got 5
      skip the output schema is a valid JSON Schema (not checked: an earlier check failed)
      skip the declared name matches the file name (not checked: an earlier check failed)
      skip the description is not empty (not checked: an earlier check failed)
      skip the timeout the tool asks for (`config`), if any, is valid (not checked: an earlier check failed)
    [TEMP]/tools/good (good)
      ok is an executable file
      ok the file name is a valid tool name
      ok no other file in its directory provides the same tool
      ok `description` answered in time
      ok the `description` output is a JSON object with the required fields
      ok the declared name is a valid tool name
      ok the input schema is a valid JSON Schema for an object
      ok no output schema is declared (optional)
      ok the declared name matches the file name
      ok the description is not empty
      ok the timeout the tool asks for (`config`), if any, is valid
    [TEMP]/tools/misnamed (misnamed)
      ok is an executable file
      ok the file name is a valid tool name
      ok no other file in its directory provides the same tool
      ok `description` answered in time
      ok the `description` output is a JSON object with the required fields
      ok the declared name is a valid tool name
      ok the input schema is a valid JSON Schema for an object
      ok the output schema is a valid JSON Schema
      FAIL the declared name matches the file name: declares name `other` but its file name makes it `misnamed`; rename the file or fix the name
      skip the description is not empty (not checked: an earlier check failed)
      skip the timeout the tool asks for (`config`), if any, is valid (not checked: an earlier check failed)
    4 files checked, 3 failed
    ----- stderr -----
    ");
}

/// A manifest (mode 0644) is checked as what it is: a file read, never run, so it is not
/// called executable and is not asked for Kodelet's `config`; an ikigai tool has no `config`
/// either; a Kodelet tool still is asked. Given by path and found in a directory alike.
#[test]
fn each_file_is_checked_for_what_applies_to_its_kind() {
    let context = TestContext::new();
    let examples = examples_dir();
    let manifest = context.tools.join("word-count.md");
    std::fs::copy(examples.join("word-count.md"), &manifest).unwrap();
    std::fs::set_permissions(
        &manifest,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    context.tool("good", &shell_tool("good", EMPTY_SCHEMA, "true"));
    let word_stats = examples.join("word-stats-tool");
    for args in [
        vec!["validate".into(), "--json".into()],
        vec![
            "validate".into(),
            "--json".into(),
            manifest.clone().into_os_string(),
            word_stats.clone().into_os_string(),
            context.tools.join("good").into_os_string(),
        ],
    ] {
        let output = context.with_tools().args(&args).output().unwrap();
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["ok"], true, "{report}");
        let files = report["files"].as_array().unwrap();
        let checks_of = |name: &str| -> Vec<(String, String)> {
            let file = files
                .iter()
                .find(|file| file["name"] == name)
                .unwrap_or_else(|| panic!("no {name}: {report}"));
            file["checks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|check| {
                    assert_eq!(check["status"], "passed", "{check}");
                    (
                        check["check"].as_str().unwrap().to_owned(),
                        check["label"].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        };
        let word_count = checks_of("word_count");
        assert!(
            word_count
                .iter()
                .all(|(code, label)| code != "requested_timeout"
                    && !label.contains("executable")
                    && !label.contains("config")),
            "{word_count:?}"
        );
        assert_eq!(word_count[0].0, "file", "{word_count:?}");
        let good = checks_of("good");
        assert_eq!(good[0].1, "is an executable file", "{good:?}");
        assert!(
            good.iter().any(|(code, _)| code == "requested_timeout"),
            "{good:?}"
        );
        if args.len() > 2 {
            let stats = checks_of("word_stats");
            assert!(
                stats.iter().all(|(code, _)| code != "requested_timeout"),
                "{stats:?}"
            );
        }
    }
}

#[test]
fn paths_names_and_json() {
    let context = TestContext::new();
    context.tool("good", &shell_tool("good", EMPTY_SCHEMA, "true"));
    std::fs::write(context.tools.join("notes.txt"), "not executable").unwrap();
    let notes = context.tools.join("notes.txt");
    cli_snapshot!(context, context.with_tools().arg("validate").arg(&notes).args(["good", "missing", "--json"]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "ok": false,
      "files": [
        {
          "path": "[TEMP]/tools/notes.txt",
          "name": null,
          "ok": false,
          "checks": [
            {
              "check": "file",
              "label": "is an executable file",
              "status": "failed",
              "error": "it is not executable (chmod +x it)"
            },
            {
              "check": "file_name",
              "label": "the file name is a valid tool name",
              "status": "skipped",
              "error": null
            },
            {
              "check": "probe",
              "label": "`description` answered in time",
              "status": "skipped",
              "error": null
            },
            {
              "check": "parse",
              "label": "the `description` output is a JSON object with the required fields",
              "status": "skipped",
              "error": null
            },
            {
              "check": "declared_name",
              "label": "the declared name is a valid tool name",
              "status": "skipped",
              "error": null
            },
            {
              "check": "input_schema",
              "label": "the input schema is a valid JSON Schema for an object",
              "status": "skipped",
              "error": null
            },
            {
              "check": "output_schema",
              "label": "the output schema is a valid JSON Schema",
              "status": "skipped",
              "error": null
            },
            {
              "check": "name_matches",
              "label": "the declared name matches the file name",
              "status": "skipped",
              "error": null
            },
            {
              "check": "description",
              "label": "the description is not empty",
              "status": "skipped",
              "error": null
            },
            {
              "check": "requested_timeout",
              "label": "the timeout the tool asks for (`config`), if any, is valid",
              "status": "skipped",
              "error": null
            }
          ]
        },
        {
          "path": "[TEMP]/tools/good",
          "name": "good",
          "ok": true,
          "checks": [
            {
              "check": "file",
              "label": "is an executable file",
              "status": "passed",
              "error": null
            },
            {
              "check": "file_name",
              "label": "the file name is a valid tool name",
              "status": "passed",
              "error": null
            },
            {
              "check": "unique",
              "label": "no other file in its directory provides the same tool",
              "status": "passed",
              "error": null
            },
            {
              "check": "probe",
              "label": "`description` answered in time",
              "status": "passed",
              "error": null
            },
            {
              "check": "parse",
              "label": "the `description` output is a JSON object with the required fields",
              "status": "passed",
              "error": null
            },
            {
              "check": "declared_name",
              "label": "the declared name is a valid tool name",
              "status": "passed",
              "error": null
            },
            {
              "check": "input_schema",
              "label": "the input schema is a valid JSON Schema for an object",
              "status": "passed",
              "error": null
            },
            {
              "check": "output_schema",
              "label": "no output schema is declared (optional)",
              "status": "passed",
              "error": null
            },
            {
              "check": "name_matches",
              "label": "the declared name matches the file name",
              "status": "passed",
              "error": null
            },
            {
              "check": "description",
              "label": "the description is not empty",
              "status": "passed",
              "error": null
            },
            {
              "check": "requested_timeout",
              "label": "the timeout the tool asks for (`config`), if any, is valid",
              "status": "passed",
              "error": null
            }
          ]
        },
        {
          "target": "missing",
          "ok": false,
          "error": "no file provides tool `missing` in the tool directories",
          "checks": []
        }
      ]
    }
    ----- stderr -----
    "#);
}

#[test]
fn no_progress_bar_on_a_pipe() {
    let context = TestContext::new();
    for index in 0..60 {
        let name = format!("tool_{index}");
        context.tool(&name, &shell_tool(&name, EMPTY_SCHEMA, "true"));
    }
    let output = context
        .with_tools()
        .args(["list", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let listing: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(listing["tools"].as_array().unwrap().len(), 60);
    assert!(
        !output.stderr.contains(&0x1b),
        "escape codes on a pipe: {:?}",
        String::from_utf8_lossy(&output.stderr)
    );
}

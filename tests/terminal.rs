//! Issue 22, finding 9: text output (`list`, `show`, `validate`, `doctor`) never writes a control
//! character that a tool supplied, coloured terminal or not: each is shown as a visible escape.

use std::fs;

use crate::context::{TestContext, shell_tool, write_executable};

/// What a hostile tool puts in every text it supplies: OSC 52 (sets the clipboard), OSC 0 (the
/// window title), a CR and a cursor movement (rewrite an earlier line), BEL, a C1 CSI (U+009B,
/// an 8-bit escape some terminals obey), a bidi override and isolate, DEL, a backspace.
const HOSTILE: &str = r"\u001b]52;c;cm0gLXJmIH4=\u0007 \u001b]0;pwned\u001b\\ ok\r\u001b[2A\u001b[2K \u009b31m \u202egnp.exe\u2066 \u007f\u0008";

/// Every text command's output, coloured: no control character but newline, tab and the
/// styles toolsmith itself writes (SGR `ESC [ digits m`), and no C1 or bidi control.
#[track_caller]
fn assert_terminal_safe(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let plain = without_styles(&text);
    let controls: Vec<char> = plain
        .chars()
        .filter(|character| {
            (character.is_control() && *character != '\n' && *character != '\t')
                || matches!(character, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect();
    assert!(
        controls.is_empty(),
        "{what} wrote the tool's control characters {controls:?}:\n{text}"
    );
}

/// `text` without its SGR sequences (`ESC [ digits-and-semicolons m`).
fn without_styles(text: &str) -> String {
    let mut plain = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("\u{1b}[") {
        plain.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let digits = after
            .find(|character: char| !character.is_ascii_digit() && character != ';')
            .unwrap_or(after.len());
        if after[digits..].starts_with('m') {
            rest = &after[digits + 1..];
        } else {
            plain.push_str(&rest[start..start + 2]);
            rest = after;
        }
    }
    plain.push_str(rest);
    plain
}

/// A world with one hostile tool (description and parameter descriptions) and one file whose
/// name carries an escape sequence, reported as a problem.
fn hostile_context() -> TestContext {
    let context = TestContext::new();
    let schema = format!(
        r#"{{"type": "object", "properties": {{"target": {{"type": "string", "description": "the target {HOSTILE}"}}}}}}"#
    );
    let script = shell_tool("evil", &schema, "echo ran")
        .replace("The evil fixture", &format!("The evil fixture {HOSTILE}"));
    context.tool("evil", &script);
    write_executable(
        &context.tools.join("bad\u{1b}]0;title\u{7}name"),
        "#!/bin/sh\nexit 0\n",
    );
    fs::write(
        context.tools.join("broken.md"),
        "---\nname: broken\ndescription: \"x\u{1b}]52;c;aGk=\u{7}\"\nparameters: 3\n---\necho\n",
    )
    .unwrap();
    context
}

#[test]
fn text_output_escapes_what_a_tool_supplies_issue_22() {
    let context = hostile_context();
    let commands: [&[&str]; 6] = [
        &["list"],
        &["list", "--all"],
        &["show", "evil"],
        &["validate", "evil"],
        &["validate", "broken"],
        &["doctor"],
    ];
    for args in commands {
        for color in ["always", "never"] {
            let output = context
                .with_tools()
                .args(["--color", color])
                .args(args)
                .output()
                .unwrap();
            let what = format!("{args:?} with --color {color}");
            assert_terminal_safe(&format!("{what} (stdout)"), &output.stdout);
            assert_terminal_safe(&format!("{what} (stderr)"), &output.stderr);
            if args == ["show", "evil"] {
                // Escaped visibly, not dropped: the user sees that something was there.
                let stdout = String::from_utf8_lossy(&output.stdout);
                assert!(stdout.contains(r"\e]52;"), "{what}: {stdout}");
                assert!(stdout.contains(r"\u{202e}"), "{what}: {stdout}");
            }
        }
    }
}

//! Simple commands, word by word: which builtins and programs read a word of theirs as
//! arithmetic, a variable name or code, so the refusals for the tags in those words.

use crate::formats::manifest::render::Item;
use crate::formats::manifest::tag_context::{PendingHereDocument, Refusal, Word, is_name_char};

/// The text of a word, a tag shown as NUL.
pub(super) fn word_text(items: &[Item], word: Word) -> String {
    items[word.start..word.end.min(items.len())]
        .iter()
        .map(|item| match item {
            Item::Char(character) => *character,
            Item::Tag(_) => '\0',
        })
        .collect()
}

/// The tags anywhere inside a word (nested quotes and substitutions included).
pub(super) fn word_tags(items: &[Item], word: Word) -> Vec<usize> {
    items[word.start..word.end.min(items.len())]
        .iter()
        .filter_map(|item| match item {
            Item::Tag(tag_index) => Some(*tag_index),
            Item::Char(_) => None,
        })
        .collect()
}

/// Reserved words and assignments before the command name.
pub(super) fn skipped_words(items: &[Item], words: &[Word]) -> usize {
    words
        .iter()
        .take_while(|word| {
            let text = word_text(items, **word);
            word.redirect || is_reserved(&text) || is_assignment(&text)
        })
        .count()
}

pub(super) fn first_command_word(items: &[Item], words: &[Word]) -> Option<Word> {
    words.get(skipped_words(items, words)).copied()
}

fn is_reserved(text: &str) -> bool {
    matches!(
        text,
        "!" | "{"
            | "}"
            | "if"
            | "then"
            | "else"
            | "elif"
            | "fi"
            | "do"
            | "done"
            | "while"
            | "until"
            | "time"
            | "esac"
    )
}

pub(super) fn is_assignment(text: &str) -> bool {
    let name_end = text
        .find(|character: char| !is_name_char(character))
        .unwrap_or(text.len());
    name_end > 0
        && !text.starts_with(|character: char| character.is_ascii_digit())
        && matches!(text[name_end..].chars().next(), Some('=' | '[' | '+'))
        && text.contains('=')
}

pub(super) const ARITHMETIC_OPERATORS: &[&str] = &["-eq", "-ne", "-lt", "-le", "-gt", "-ge"];

/// The refusals one simple command implies for the tags in its words.
pub(super) fn analyze(items: &[Item], words: &[Word]) -> Vec<(usize, Refusal)> {
    let mut refusals = Vec::new();
    let skipped = skipped_words(items, words);
    let mut words: Vec<Word> = words[skipped..]
        .iter()
        .copied()
        .filter(|word| !word.redirect)
        .collect();
    // `command`, `builtin` and `exec` run the next word.
    while words.len() > 1
        && matches!(
            word_text(items, words[0]).as_str(),
            "command" | "builtin" | "exec"
        )
    {
        words.remove(0);
    }
    let Some(first) = words.first() else {
        return refusals;
    };
    let name = word_text(items, *first);
    let name = name.trim_start_matches('\\');
    let program = name.rsplit('/').next().unwrap_or(name);
    let arguments = &words[1..];
    let texts: Vec<String> = arguments
        .iter()
        .map(|word| word_text(items, *word))
        .collect();
    let mut refuse_word = |word: Word, refusal: Refusal| {
        for tag_index in word_tags(items, word) {
            refusals.push((tag_index, refusal));
        }
    };
    let is_option = |text: &str| text.starts_with('-') || text.starts_with('+');
    match program {
        "let" => {
            for word in arguments {
                refuse_word(*word, Refusal::Arithmetic("let"));
            }
        }
        "declare" | "typeset" | "local" | "export" | "readonly" => {
            declare_refusals(program, arguments, &texts, &mut refuse_word);
        }
        "unset" => {
            for (word, text) in arguments.iter().zip(&texts) {
                if !is_option(text) || text.contains('\0') {
                    refuse_word(*word, Refusal::Name("unset"));
                }
            }
        }
        "read" | "mapfile" | "readarray" | "wait" | "getopts" | "printf" | "test" | "[" => {
            name_operand_refusals(program, arguments, &texts, &mut refuse_word);
        }
        "eval" => {
            for word in arguments {
                refuse_word(*word, Refusal::Code("eval"));
            }
        }
        "trap" => {
            if let Some((word, _)) = arguments
                .iter()
                .zip(&texts)
                .find(|(_, text)| !is_option(text) || text.contains('\0'))
            {
                refuse_word(*word, Refusal::Code("the action of trap"));
            }
        }
        "sh" | "bash" | "dash" | "ksh" | "zsh" | "mksh" | "busybox" => {
            let mut script_next = false;
            for (word, text) in arguments.iter().zip(&texts) {
                if script_next {
                    refuse_word(*word, Refusal::Code("the script of sh -c"));
                    break;
                }
                if text.starts_with('-') && !text.starts_with("--") && text.contains('c') {
                    script_next = true;
                } else if !is_option(text) {
                    break;
                }
            }
        }
        "[[" => {
            for (position, word) in arguments.iter().enumerate() {
                if word_tags(items, *word).is_empty() {
                    continue;
                }
                let before = position.checked_sub(1).and_then(|before| texts.get(before));
                let after = texts.get(position + 1);
                if before.is_some_and(|text| text == "-v" || text == "-R") {
                    refuse_word(
                        *word,
                        Refusal::Arithmetic("the name of [[ -v ]], whose subscript is arithmetic"),
                    );
                } else if [before, after]
                    .into_iter()
                    .flatten()
                    .any(|text| ARITHMETIC_OPERATORS.contains(&text.as_str()))
                {
                    refuse_word(
                        *word,
                        Refusal::Arithmetic("an operand of -eq, -lt, -gt and the like in [[ ]]"),
                    );
                }
            }
        }
        _ => {}
    }
    refusals
}

/// The refusals of `declare` and its kin: every name they set, and every value when `-i`
/// (arithmetic) or `-n` (a name reference) makes them evaluate it.
fn declare_refusals(
    program: &str,
    arguments: &[Word],
    texts: &[String],
    refuse_word: &mut impl FnMut(Word, Refusal),
) {
    let is_option = |text: &str| text.starts_with('-') || text.starts_with('+');
    let options: String = texts
        .iter()
        .take_while(|text| is_option(text))
        .cloned()
        .collect();
    let evaluated = options.contains('i') || (program != "export" && options.contains('n'));
    for (word, text) in arguments.iter().zip(texts) {
        if is_option(text) && !text.contains('\0') {
            continue;
        }
        if evaluated {
            let refusal = if options.contains('i') {
                Refusal::Arithmetic("an integer variable of declare -i")
            } else {
                Refusal::Name("the value of a declare -n name reference")
            };
            refuse_word(*word, refusal);
            continue;
        }
        let name_end = text.find('=').map_or(word.end, |offset| {
            word.start + text[..offset].chars().count()
        });
        let name_part = Word {
            start: word.start,
            end: name_end,
            redirect: false,
        };
        refuse_word(
            name_part,
            Refusal::Name("the name of a declare, export, local or readonly"),
        );
    }
}

/// The refusals of the commands that take a variable name as an operand or after an option
/// (`read`, `mapfile`, `printf -v`, `test -v`, ...), skipping the values of other options.
fn name_operand_refusals(
    program: &str,
    arguments: &[Word],
    texts: &[String],
    refuse_word: &mut impl FnMut(Word, Refusal),
) {
    let is_option = |text: &str| text.starts_with('-') || text.starts_with('+');
    let takes_value: &[&str] = match program {
        "read" => &["-d", "-i", "-n", "-N", "-p", "-t", "-u"],
        "mapfile" | "readarray" => &["-d", "-n", "-O", "-s", "-u", "-C", "-c"],
        _ => &[],
    };
    let takes_name: &[&str] = match program {
        "read" => &["-a"],
        "wait" => &["-p"],
        "printf" => &["-v"],
        "test" | "[" => &["-v", "-R"],
        _ => &[],
    };
    let mut operand = 0;
    let mut skip_next = false;
    let mut name_next = false;
    for (word, text) in arguments.iter().zip(texts) {
        if skip_next {
            skip_next = false;
            continue;
        }
        if name_next {
            name_next = false;
            refuse_word(*word, Refusal::Name(program_label(program)));
            continue;
        }
        if takes_name.contains(&text.as_str()) {
            name_next = true;
            continue;
        }
        if matches!(program, "read" | "mapfile" | "readarray")
            && takes_value.contains(&text.as_str())
        {
            skip_next = true;
            continue;
        }
        if is_option(text) && !text.contains('\0') {
            continue;
        }
        let is_name = match program {
            "read" | "mapfile" | "readarray" => true,
            "getopts" => operand == 1,
            _ => false,
        };
        if is_name {
            refuse_word(*word, Refusal::Name(program_label(program)));
        }
        operand += 1;
    }
}

fn program_label(program: &str) -> &'static str {
    match program {
        "read" => "read",
        "mapfile" | "readarray" => "mapfile",
        "wait" => "wait -p",
        "getopts" => "getopts",
        "printf" => "printf -v",
        _ => "test -v",
    }
}

/// Reads the delimiter word after `<<` starting at `index`; returns the
/// here-document and the index after the word.
pub(super) fn here_document_word(items: &[Item], mut index: usize) -> (PendingHereDocument, usize) {
    let strip_tabs = items.get(index) == Some(&Item::Char('-'));
    if strip_tabs {
        index += 1;
    }
    while let Some(Item::Char(' ' | '\t')) = items.get(index) {
        index += 1;
    }
    let mut delimiter = String::new();
    let mut quote: Option<char> = None;
    while let Some(item) = items.get(index) {
        let Item::Char(character) = *item else {
            // A tag in the delimiter makes it unmatchable; keep a marker so it never matches.
            delimiter.push('\0');
            index += 1;
            continue;
        };
        match (quote, character) {
            (Some(open), _) if character == open => quote = None,
            (Some(_), _) => delimiter.push(character),
            (None, '\'' | '"') => quote = Some(character),
            (None, '\\') => {
                if let Some(Item::Char(escaped)) = items.get(index + 1) {
                    delimiter.push(*escaped);
                    index += 1;
                }
            }
            (None, _) if character.is_whitespace() || ";&|()<>".contains(character) => break,
            (None, _) => delimiter.push(character),
        }
        index += 1;
    }
    (
        PendingHereDocument {
            delimiter,
            strip_tabs,
        },
        index,
    )
}

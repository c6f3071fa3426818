//! The classic BPF program of the system-call filter: the architecture
//! check, then a balanced binary search over the numbers of the rules
//! (`seccomp.rs` says which calls are refused and why; this module only
//! compiles that table), whose leaves run each number's rule.

use crate::seccomp::{
    AF_UNIX, LAST_CLASSIFIED, PROXIED_FAMILIES, Rule, SET_ID_BITS, SOCK_TYPE_MASK,
    SOCKETPAIR_TYPES, named_rules, rules_for,
};

/// `O_CREAT`, the same on every architecture the filter supports.
const O_CREAT: u32 = 0o100;

/// `AUDIT_ARCH_X86_64`: EM_X86_64 | 64-bit | little-endian.
#[cfg(target_arch = "x86_64")]
pub(crate) const AUDIT_ARCH: u32 = 0xC000_003E;
/// `AUDIT_ARCH_AARCH64`: EM_AARCH64 | 64-bit | little-endian.
#[cfg(target_arch = "aarch64")]
pub(crate) const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) const AUDIT_ARCH: u32 = 0;

/// x32 system calls are numbered from this bit on x86_64; each is another
/// entry point to a call the list below names by its 64-bit number.
pub(crate) const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// `BPF_LD | BPF_W | BPF_ABS` (0x00, 0x00, 0x20).
pub(crate) const BPF_LD_W_ABS: u16 = 0x20;
/// `BPF_ALU | BPF_AND | BPF_K` (0x04, 0x50, 0x00).
pub(crate) const BPF_ALU_AND_K: u16 = 0x54;
/// `BPF_JMP | BPF_JEQ | BPF_K`, and the same with `BPF_JGE` and `BPF_JSET`.
pub(crate) const BPF_JEQ_K: u16 = 0x15;
pub(crate) const BPF_JGE_K: u16 = 0x35;
pub(crate) const BPF_JSET_K: u16 = 0x45;
/// `BPF_JMP | BPF_JA`: an unconditional jump by `k`, 32 bits wide.
pub(crate) const BPF_JA: u16 = 0x05;
pub(crate) const BPF_RET_K: u16 = 0x06;

pub(crate) const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
pub(crate) const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
pub(crate) const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
pub(crate) const SECCOMP_RET_USER_NOTIF: u32 = 0x7fc0_0000;

/// Offsets in `struct seccomp_data`.
pub(crate) const OFFSET_NR: u32 = 0;
pub(crate) const OFFSET_ARCH: u32 = 4;
/// The low 32 bits of the first argument (little-endian).
pub(crate) const OFFSET_ARG0_LOW: u32 = 16;

pub(crate) fn statement(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

pub(crate) fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// A run of consecutive numbers with one rule (only plain refusals are
/// merged): the unit the search sorts and a leaf compares.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    pub(crate) first: u32,
    pub(crate) last: u32,
    pub(crate) rule: Rule,
}

/// `rules` (sorted) with runs of consecutive numbers refused alike merged:
/// `acct` to `ioperm` are eleven numbers in a row on x86_64, the mount API
/// and `io_uring` nine.
pub(crate) fn spans(rules: &[(u32, Rule)]) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::with_capacity(rules.len());
    for &(call, rule) in rules {
        match spans.last_mut() {
            Some(span)
                if matches!(rule, Rule::Refuse(_))
                    && span.rule == rule
                    && span.last + 1 == call =>
            {
                span.last = call;
            }
            _ => spans.push(Span {
                first: call,
                last: call,
                rule,
            }),
        }
    }
    spans
}

/// Spans a leaf of the search compares one by one. Each level of the tree
/// costs one comparison on the way down, each span of a leaf one or two
/// more and as many instructions: eight keeps both the program (about a
/// hundred instructions) and the longest walk (about a dozen) short.
pub(crate) const LEAF_SIZE: usize = 8;

/// The program: the architecture check, then a balanced binary search over
/// the sorted spans of `rules` (as libseccomp's binary-tree optimisation
/// does), whose leaves run the rule of the number they find and allow every
/// other one.
///
/// The kernel runs the filter for every system call the run makes, and once
/// more for every number of every architecture when it installs it (to
/// cache the numbers the filter allows whatever their arguments): a search
/// takes about a dozen steps where a list of every rule took all of them.
/// Installing also translates and compiles every instruction, so the leaves
/// keep the program small: consecutive numbers share a comparison, and the
/// rules of a leaf share its returns.
#[cfg(test)]
pub(crate) fn build(
    network_denied: impl Into<crate::seccomp::Sockets>,
    private_pids: bool,
) -> Vec<libc::sock_filter> {
    build_for(network_denied, private_pids, false)
}

/// [`build`], with the calls that make a name sent to the supervisor when `creations`.
pub(crate) fn build_for(
    network_denied: impl Into<crate::seccomp::Sockets>,
    private_pids: bool,
    creations: bool,
) -> Vec<libc::sock_filter> {
    let mut program = header();
    program.extend(search(&table_for(network_denied, private_pids, creations)));
    program
}

/// The filter as it was before the allow-list (a deny-list): the same
/// header and search over the spans of the calls with a rule of their own
/// (`named_rules`), whose leaves allow every other number, the unnamed and
/// those above `LAST_CLASSIFIED` included. No run gets it: `cargo xtask
/// bench` compares its cost with the allow-list's.
pub(crate) fn build_deny_list(
    network_denied: impl Into<crate::seccomp::Sockets>,
    private_pids: bool,
) -> Vec<libc::sock_filter> {
    let mut program = header();
    program.extend(search(&spans(&named_rules(network_denied, private_pids))));
    program
}

/// The spans the search runs over: those of `rules`, which classify every
/// number up to `LAST_CLASSIFIED`, and one more refusing every number above
/// with `ENOSYS` (on x86_64 the header has refused the x32 numbers already).
#[cfg(test)]
pub(crate) fn table(
    network_denied: impl Into<crate::seccomp::Sockets>,
    private_pids: bool,
) -> Vec<Span> {
    table_for(network_denied, private_pids, false)
}

/// [`table`], with the calls that make a name sent to the supervisor when `creations`.
pub(crate) fn table_for(
    network_denied: impl Into<crate::seccomp::Sockets>,
    private_pids: bool,
    creations: bool,
) -> Vec<Span> {
    let mut table = spans(&rules_for(network_denied, private_pids, creations));
    let first = LAST_CLASSIFIED + 1;
    let last = if cfg!(target_arch = "x86_64") {
        X32_SYSCALL_BIT - 1
    } else {
        u32::MAX
    };
    match table.last_mut() {
        Some(span) if span.rule == Rule::Refuse(libc::ENOSYS) && span.last + 1 == first => {
            span.last = last;
        }
        _ => table.push(Span {
            first,
            last,
            rule: Rule::Refuse(libc::ENOSYS),
        }),
    }
    table
}

/// Loads the number after checking the architecture: a foreign one kills,
/// an x32 number is refused.
pub(crate) fn header() -> Vec<libc::sock_filter> {
    let mut program = vec![
        statement(BPF_LD_W_ABS, OFFSET_ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH, 1, 0),
        statement(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
        statement(BPF_LD_W_ABS, OFFSET_NR),
    ];
    if cfg!(target_arch = "x86_64") {
        program.push(jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1));
        program.push(refuse(libc::EPERM));
    }
    program
}

/// The search over `spans` (sorted, the number in the accumulator): a
/// fragment of which every path ends in a return, so fragments join without
/// knowing what follows them.
pub(crate) fn search(spans: &[Span]) -> Vec<libc::sock_filter> {
    if spans.len() <= LEAF_SIZE {
        return leaf(spans);
    }
    let middle = spans.len() / 2;
    let below = search(&spans[..middle]);
    let above = search(&spans[middle..]);
    let pivot = spans[middle].first;
    let mut fragment = Vec::with_capacity(below.len() + above.len() + 2);
    match u8::try_from(below.len()) {
        Ok(over_below) => fragment.push(jump(BPF_JGE_K, pivot, over_below, 0)),
        Err(_) => {
            // A conditional jump reaches 255 instructions at most; an
            // unconditional one takes a 32-bit offset.
            fragment.push(jump(BPF_JGE_K, pivot, 0, 1));
            fragment.push(statement(BPF_JA, count(below.len())));
        }
    }
    fragment.extend(below);
    fragment.extend(above);
    fragment
}

/// Where a jump of a leaf goes, resolved to an offset once the leaf is laid out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Goto {
    /// The next instruction; after the last comparison, the ALLOW.
    Next,
    Allow,
    Refuse(i32),
    /// The supervisor's notification (`Rule::Notify`).
    Notify,
    /// The argument check of the leaf's span at this index.
    Check(usize),
}

/// An instruction of a leaf; `jt` and `jf` matter for jumps only.
pub(crate) struct Op {
    code: u16,
    k: u32,
    jt: Goto,
    jf: Goto,
}

pub(crate) fn op(code: u16, k: u32) -> Op {
    op_jump(code, k, Goto::Next, Goto::Next)
}

pub(crate) fn op_jump(code: u16, k: u32, jt: Goto, jf: Goto) -> Op {
    Op { code, k, jt, jf }
}

/// A leaf: the comparisons, in ascending order, each jumping to its span's
/// refusal or argument check; then the argument checks (one copy of each
/// distinct one), the ALLOW and the refusals, which every rule of the leaf
/// shares.
pub(crate) fn leaf(spans: &[Span]) -> Vec<libc::sock_filter> {
    let mut ops = Vec::new();
    for (index, span) in spans.iter().enumerate() {
        let target = match span.rule {
            Rule::Refuse(errno) => Goto::Refuse(errno),
            Rule::Notify => Goto::Notify,
            _ => Goto::Check(index),
        };
        if span.first == span.last {
            ops.push(op_jump(BPF_JEQ_K, span.first, target, Goto::Next));
        } else {
            // Below this span the number is below every remaining one too.
            ops.push(op_jump(BPF_JGE_K, span.first, Goto::Next, Goto::Allow));
            // A span up to the largest number needs no upper bound.
            match span.last.checked_add(1) {
                Some(above) => ops.push(op_jump(BPF_JGE_K, above, Goto::Next, target)),
                None => ops.push(op_jump(BPF_JGE_K, span.first, target, target)),
            }
        }
    }
    let comparisons = ops.len();
    let mut check_at = vec![0; spans.len()];
    for (index, span) in spans.iter().enumerate() {
        check_at[index] = match spans[..index]
            .iter()
            .position(|seen| seen.rule == span.rule)
        {
            Some(same) => check_at[same],
            None => {
                let start = ops.len();
                ops.extend(check(span.rule));
                start
            }
        };
    }
    let allow_at = ops.len();
    ops.push(op(BPF_RET_K, SECCOMP_RET_ALLOW));
    let notify_at = ops.len();
    if ops
        .iter()
        .any(|op| op.jt == Goto::Notify || op.jf == Goto::Notify)
    {
        ops.push(op(BPF_RET_K, SECCOMP_RET_USER_NOTIF));
    }
    let mut refusals: Vec<(i32, usize)> = Vec::new();
    for index in 0..ops.len() {
        for goto in [ops[index].jt, ops[index].jf] {
            if let Goto::Refuse(errno) = goto
                && !refusals.iter().any(|&(known, _)| known == errno)
            {
                refusals.push((errno, ops.len()));
                ops.push(op(BPF_RET_K, refusal(errno)));
            }
        }
    }
    let resolve = |from: usize, goto: Goto| -> u8 {
        let target = match goto {
            Goto::Next if from + 1 == comparisons => allow_at,
            Goto::Next => from + 1,
            Goto::Allow => allow_at,
            Goto::Notify => notify_at,
            Goto::Refuse(errno) => refusals
                .iter()
                .find(|&&(known, _)| known == errno)
                .map(|&(_, at)| at)
                .expect("every refusal a leaf jumps to is laid out"),
            Goto::Check(index) => check_at[index],
        };
        u8::try_from(target - (from + 1)).expect("a leaf is a few dozen instructions")
    };
    ops.iter()
        .enumerate()
        .map(|(index, op)| {
            // The class bits of a jump (`BPF_JMP`).
            if op.code & 0x07 == 0x05 {
                jump(op.code, op.k, resolve(index, op.jt), resolve(index, op.jf))
            } else {
                statement(op.code, op.k)
            }
        })
        .collect()
}

/// The argument check of a rule, run with the number in the accumulator:
/// it loads an argument and jumps to the leaf's ALLOW or refusal.
pub(crate) fn check(rule: Rule) -> Vec<Op> {
    let refuse = Goto::Refuse(libc::EPERM);
    let allow_only = |values: &[u32], refuse: Goto| {
        let mut ops: Vec<Op> = values
            .iter()
            .map(|&value| op_jump(BPF_JEQ_K, value, Goto::Allow, Goto::Next))
            .collect();
        if let Some(last) = ops.last_mut() {
            last.jf = refuse;
        }
        ops
    };
    match rule {
        Rule::Refuse(_) | Rule::Notify => Vec::new(),
        Rule::RefuseBits { argument, mask } => vec![
            op(BPF_LD_W_ABS, argument_low(argument)),
            op_jump(BPF_JSET_K, mask, refuse, Goto::Allow),
        ],
        Rule::RefuseFamily(family) => vec![
            op(BPF_LD_W_ABS, argument_low(0)),
            op_jump(BPF_JEQ_K, family, refuse, Goto::Allow),
        ],
        Rule::UnixStreamPairsOnly => {
            let mut ops = vec![
                op(BPF_LD_W_ABS, argument_low(0)),
                op_jump(BPF_JEQ_K, AF_UNIX, Goto::Next, refuse),
                op(BPF_LD_W_ABS, argument_low(1)),
                op(BPF_ALU_AND_K, SOCK_TYPE_MASK),
            ];
            ops.extend(allow_only(&SOCKETPAIR_TYPES, refuse));
            ops
        }
        Rule::ProxiedOrUnixStream => {
            let mut ops = vec![op(BPF_LD_W_ABS, argument_low(0))];
            ops.extend(
                PROXIED_FAMILIES
                    .iter()
                    .map(|&family| op_jump(BPF_JEQ_K, family, Goto::Allow, Goto::Next)),
            );
            ops.extend([
                op_jump(BPF_JEQ_K, AF_UNIX, Goto::Next, refuse),
                op(BPF_LD_W_ABS, argument_low(1)),
                op(BPF_ALU_AND_K, SOCK_TYPE_MASK),
            ]);
            ops.extend(allow_only(&SOCKETPAIR_TYPES, refuse));
            ops
        }
        Rule::NotifyCreate { flags, mode } => vec![
            op(BPF_LD_W_ABS, argument_low(flags)),
            op_jump(BPF_JSET_K, O_CREAT, Goto::Notify, Goto::Next),
            op(BPF_LD_W_ABS, argument_low(mode)),
            op_jump(BPF_JSET_K, SET_ID_BITS, refuse, Goto::Allow),
        ],
        Rule::AllowOnly {
            argument,
            values,
            errno,
        } => {
            let mut ops = vec![op(BPF_LD_W_ABS, argument_low(argument))];
            ops.extend(allow_only(values, Goto::Refuse(errno)));
            ops
        }
    }
}

pub(crate) fn refusal(errno: i32) -> u32 {
    SECCOMP_RET_ERRNO | u32::try_from(errno).expect("errno values are small and positive")
}

pub(crate) fn refuse(errno: i32) -> libc::sock_filter {
    statement(BPF_RET_K, refusal(errno))
}

/// The offset of the low 32 bits of argument `argument` (little-endian).
pub(crate) fn argument_low(argument: u32) -> u32 {
    OFFSET_ARG0_LOW + 8 * argument
}

pub(crate) fn count(length: usize) -> u32 {
    u32::try_from(length).expect("the filter is well under 4096 instructions")
}

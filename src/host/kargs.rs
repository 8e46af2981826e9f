//! Kernel arguments as MCO handles them (`pkg/daemon/update.go`: `splitKernelArguments`,
//! `parseKernelArguments`, `generateKargs`; on-disk validation, mco-facts 4.2.j and 4.4).
//!
//! Owns the pure rules: quote-aware splitting of `spec.kernelArguments` entries, the update as
//! removals of every old argument then additions of every new one (in merge order, duplicates
//! kept), applying that update to a command line, and the after-boot check. The hosts run it:
//! a real node through its boot setup ([`super::boot`]: rpm-ostree, grubby, BootLoaderSpec
//! entries, GRUB's `/etc/default/grub`, kernel-install), a sandbox as a recorded pending
//! command line.

/// Whitespace in the "C" locale (MCO's `isSpace`).
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\x0c' | '\n' | '\r' | '\t' | '\x0b')
}

/// Splits one command line into arguments as the kernel's `next_arg()` does: whitespace
/// separates, double quotes protect spaces and are kept (`"a=1 b=2"` is one argument, quotes
/// included), there is no escaping.
pub fn split_kernel_arguments(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_quote = false;
    for c in args.chars() {
        if is_space(c) && !in_quote {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            continue;
        }
        if c == '"' {
            in_quote = !in_quote;
        }
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Every argument of every `spec.kernelArguments` entry, in order, duplicates kept (MCO's
/// `parseKernelArguments`).
pub fn parse_kernel_arguments(entries: &[String]) -> Vec<String> {
    entries
        .iter()
        .flat_map(|e| split_kernel_arguments(e))
        .map(|a| a.trim().to_string())
        .collect()
}

/// The update from `old` to `new` (`spec.kernelArguments` of both configs): every old argument
/// deleted, then every new one appended (MCO's `generateKargs`); nothing when the lists are
/// equal (MCO's kargs diff flag).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KargsUpdate {
    /// Arguments removed (each old argument, in merge order).
    pub delete: Vec<String>,
    /// Arguments appended (each new argument, in merge order).
    pub append: Vec<String>,
}

impl KargsUpdate {
    /// The update from `old` to `new` `spec.kernelArguments`.
    pub fn between(old: &[String], new: &[String]) -> KargsUpdate {
        if old == new {
            return KargsUpdate::default();
        }
        KargsUpdate {
            delete: parse_kernel_arguments(old),
            append: parse_kernel_arguments(new),
        }
    }

    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.delete.is_empty() && self.append.is_empty()
    }

    /// `rpm-ostree kargs` arguments: `--delete-if-present=<a>` per deletion, `--append=<a>` per
    /// addition (mco-facts 4.2.j).
    pub fn rpm_ostree_args(&self) -> Vec<String> {
        let mut args = vec!["kargs".to_string()];
        args.extend(self.delete.iter().map(|a| format!("--delete-if-present={a}")));
        args.extend(self.append.iter().map(|a| format!("--append={a}")));
        args
    }

    /// `grubby` arguments for hosts without rpm-ostree.
    pub fn grubby_args(&self) -> Vec<String> {
        let mut args = vec!["--update-kernel=ALL".to_string()];
        if !self.delete.is_empty() {
            args.push(format!("--remove-args={}", self.delete.join(" ")));
        }
        if !self.append.is_empty() {
            args.push(format!("--args={}", self.append.join(" ")));
        }
        args
    }

    /// The command line after the update: each deleted argument's first occurrence removed
    /// (absent ones ignored, as `--delete-if-present`), then the additions appended in order.
    pub fn apply(&self, cmdline: &str) -> String {
        let mut lists = vec![split_kernel_arguments(cmdline)];
        self.apply_to_lists(&mut lists);
        lists.concat().join(" ")
    }

    /// The update applied to a command line held in pieces (the `options` lines of one
    /// BootLoaderSpec entry, read in order as one command line): each deleted argument's first
    /// occurrence across the pieces removed, then the additions appended to the last piece (a
    /// new piece when there is none and something is added). The same result as
    /// [`KargsUpdate::apply`] on the pieces joined.
    pub fn apply_to_lists(&self, lists: &mut Vec<Vec<String>>) {
        for d in &self.delete {
            if let Some(list) = lists.iter_mut().find(|l| l.contains(d)) {
                let i = list.iter().position(|a| a == d).expect("found above");
                list.remove(i);
            }
        }
        if self.append.is_empty() {
            return;
        }
        if lists.is_empty() {
            lists.push(Vec::new());
        }
        lists
            .last_mut()
            .expect("one list at least")
            .extend(self.append.iter().cloned());
    }
}

/// The arguments of `expected` (`spec.kernelArguments`) missing from the booted `cmdline`.
pub fn missing_kernel_arguments(expected: &[String], cmdline: &str) -> Vec<String> {
    let booted = split_kernel_arguments(cmdline);
    parse_kernel_arguments(expected)
        .into_iter()
        .filter(|a| !booted.contains(a))
        .collect()
}

/// MCO's message for [`missing_kernel_arguments`]: `missing expected kernel arguments: [a b]`
/// (Go's `%v` of a string slice).
pub fn missing_message(missing: &[String]) -> String {
    format!("missing expected kernel arguments: [{}]", missing.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn splitting_honours_double_quotes() {
        assert_eq!(
            split_kernel_arguments("  a=1\tb  \"c=x y\" d=\"p q\"e "),
            s(&["a=1", "b", "\"c=x y\"", "d=\"p q\"e"])
        );
        assert_eq!(split_kernel_arguments(""), Vec::<String>::new());
        assert_eq!(
            parse_kernel_arguments(&s(&["nosmt", "a=1 b=2", "nosmt"])),
            s(&["nosmt", "a=1", "b=2", "nosmt"])
        );
    }

    #[test]
    fn updates_delete_all_old_then_append_all_new() {
        let u = KargsUpdate::between(&s(&["a=1 b=2"]), &s(&["b=2", "c"]));
        assert_eq!(u.delete, s(&["a=1", "b=2"]));
        assert_eq!(u.append, s(&["b=2", "c"]));
        assert_eq!(
            u.rpm_ostree_args(),
            s(&[
                "kargs",
                "--delete-if-present=a=1",
                "--delete-if-present=b=2",
                "--append=b=2",
                "--append=c"
            ])
        );
        assert_eq!(u.apply("root=/dev/sda a=1 b=2 quiet"), "root=/dev/sda quiet b=2 c");
        assert!(KargsUpdate::between(&s(&["x"]), &s(&["x"])).is_empty());
        // duplicates stay duplicates, a deletion removes one occurrence
        let dup = KargsUpdate::between(&[], &s(&["hugepages=1", "hugepages=1"]));
        assert_eq!(dup.apply("ro"), "ro hugepages=1 hugepages=1");
        assert_eq!(
            KargsUpdate::between(&s(&["hugepages=1"]), &[]).apply("ro hugepages=1 hugepages=1"),
            "ro hugepages=1"
        );
    }

    #[test]
    fn missing_arguments_after_boot() {
        let m = missing_kernel_arguments(&s(&["nosmt", "\"a=1 2\" z"]), "ro nosmt \"a=1 2\"");
        assert_eq!(m, s(&["z"]));
        assert_eq!(
            missing_message(&s(&["z", "y=1"])),
            "missing expected kernel arguments: [z y=1]"
        );
    }
}

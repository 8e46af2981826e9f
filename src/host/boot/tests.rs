//! The backends on sandbox roots: fake boot files, fake commands on a path the test controls
//! (each logs its name and arguments), the files compared byte for byte.

use super::*;
use std::os::unix::fs::PermissionsExt;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

struct Sandbox {
    _dir: tempfile::TempDir,
    root: PathBuf,
    bin: PathBuf,
    log: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&bin).unwrap();
        let log = dir.path().join("calls");
        Sandbox {
            _dir: dir,
            root,
            bin,
            log,
        }
    }

    fn env(&self) -> BootEnv {
        BootEnv {
            root: self.root.clone(),
            path: vec![self.bin.clone()],
        }
    }

    /// A fake command `name` on the path: logs `name<TAB>arg…` and exits with `exit`.
    fn command(&self, name: &str, exit: i32) {
        let script = format!(
            "#!/bin/sh\n{{ printf '%s' {name}; for a in \"$@\"; do printf '\\t%s' \"$a\"; done; printf '\\n'; }} >> '{}'\nexit {exit}\n",
            self.log.display()
        );
        let path = self.bin.join(name);
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn file(&self, node: &str, contents: &str) {
        let p = self.root.join(node.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, contents).unwrap();
    }

    fn read(&self, node: &str) -> String {
        std::fs::read_to_string(self.root.join(node.trim_start_matches('/'))).unwrap()
    }

    fn calls(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| l.split('\t').map(String::from).collect())
            .collect()
    }

    fn apply(&self, update: &KargsUpdate) -> Result<Backend, HostError> {
        let backend = detect(&self.env())?;
        backend.apply(&self.env(), update)?;
        Ok(backend)
    }
}

fn update(old: &[&str], new: &[&str]) -> KargsUpdate {
    KargsUpdate::between(&s(old), &s(new))
}

#[test]
fn rpm_ostree_on_an_ostree_booted_host() {
    let sb = Sandbox::new();
    sb.file(OSTREE_BOOTED, "");
    sb.command("rpm-ostree", 0);
    sb.command("grubby", 0);
    let b = sb.apply(&update(&["a=1"], &["b=2 c"])).unwrap();
    assert_eq!(b.name(), "rpm-ostree");
    assert_eq!(
        sb.calls(),
        [s(&[
            "rpm-ostree",
            "kargs",
            "--delete-if-present=a=1",
            "--append=b=2",
            "--append=c"
        ])]
    );
}

#[test]
fn grubby_when_on_the_path_even_beside_bls_entries() {
    let sb = Sandbox::new();
    sb.command("grubby", 0);
    sb.file("/boot/loader/entries/fedora.conf", "title Fedora\noptions ro\n");
    let b = sb.apply(&update(&["a=1", "x"], &["nosmt"])).unwrap();
    assert_eq!(b.name(), "grubby");
    assert_eq!(
        sb.calls(),
        [s(&[
            "grubby",
            "--update-kernel=ALL",
            "--remove-args=a=1 x",
            "--args=nosmt"
        ])]
    );
    assert_eq!(
        sb.read("/boot/loader/entries/fedora.conf"),
        "title Fedora\noptions ro\n"
    );
}

#[test]
fn bootloader_spec_entries_without_grubby() {
    let sb = Sandbox::new();
    let with =
        "# managed by kernel-install\ntitle      Fedora Linux (6.8.5)\nversion    6.8.5\nlinux      /vmlinuz-6.8.5\n\
                options    root=UUID=1234 ro a=1 quiet\ninitrd     /initramfs-6.8.5.img\n";
    let without = "title rescue\r\nlinux /vmlinuz-rescue";
    sb.file("/boot/loader/entries/a-6.8.5.conf", with);
    sb.file("/boot/loader/entries/b-rescue.conf", without);
    sb.file("/boot/loader/entries/notes.txt", "not an entry\n");
    sb.file(KERNEL_CMDLINE, "root=UUID=1234 ro a=1\n");
    std::fs::set_permissions(
        sb.root.join("boot/loader/entries/a-6.8.5.conf"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let b = sb.apply(&update(&["a=1"], &["nosmt", "\"dyndbg=file x +p\""])).unwrap();
    assert_eq!(
        b,
        Backend::BootLoaderSpec {
            entries: s(&[
                "/boot/loader/entries/a-6.8.5.conf",
                "/boot/loader/entries/b-rescue.conf"
            ]),
            kernel_cmdline: true
        }
    );
    assert_eq!(
        sb.read("/boot/loader/entries/a-6.8.5.conf"),
        "# managed by kernel-install\ntitle      Fedora Linux (6.8.5)\nversion    6.8.5\nlinux      /vmlinuz-6.8.5\n\
         options root=UUID=1234 ro quiet nosmt \"dyndbg=file x +p\"\ninitrd     /initramfs-6.8.5.img\n"
    );
    assert_eq!(
        std::fs::metadata(sb.root.join("boot/loader/entries/a-6.8.5.conf"))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777,
        0o600,
        "the mode is kept"
    );
    assert_eq!(
        sb.read("/boot/loader/entries/b-rescue.conf"),
        "title rescue\r\nlinux /vmlinuz-rescue\noptions nosmt \"dyndbg=file x +p\"\n"
    );
    assert_eq!(
        sb.read(KERNEL_CMDLINE),
        "root=UUID=1234 ro nosmt \"dyndbg=file x +p\"\n"
    );
    assert_eq!(sb.read("/boot/loader/entries/notes.txt"), "not an entry\n");
    assert!(sb.calls().is_empty(), "no command runs");
}

/// On a boot partition shared with another installation, only this one's entries (named for
/// its machine id, as kernel-install names them) are edited.
#[test]
fn only_this_installations_bls_entries_when_they_are_named_for_it() {
    let sb = Sandbox::new();
    sb.file("/etc/machine-id", "0123abcd\n");
    sb.file("/efi/loader/entries/0123abcd-6.8.5.conf", "options ro\n");
    sb.file("/efi/loader/entries/99ffeeaa-6.1.0.conf", "options ro other\n");
    let b = sb.apply(&update(&[], &["nosmt"])).unwrap();
    assert_eq!(
        b,
        Backend::BootLoaderSpec {
            entries: s(&["/efi/loader/entries/0123abcd-6.8.5.conf"]),
            kernel_cmdline: false
        }
    );
    assert_eq!(sb.read("/efi/loader/entries/0123abcd-6.8.5.conf"), "options ro nosmt\n");
    assert_eq!(sb.read("/efi/loader/entries/99ffeeaa-6.1.0.conf"), "options ro other\n");
}

const GRUB: &str = "# If you change this file, run 'update-grub' afterwards to update\n\
# /boot/grub/grub.cfg.\n\
\n\
GRUB_DEFAULT=0\n\
GRUB_TIMEOUT=5\n\
GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`\n\
GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n\
#GRUB_CMDLINE_LINUX=\"commented out\"\n\
GRUB_CMDLINE_LINUX=\"console=tty0 a=1\"   # serial too\n\
\n\
# Uncomment to disable graphical terminal\n\
#GRUB_TERMINAL=console\n";

#[test]
fn grub_default_and_update_grub_on_debian() {
    let sb = Sandbox::new();
    sb.file(GRUB_DEFAULT, GRUB);
    sb.command("update-grub", 0);
    sb.command("grub-mkconfig", 0);
    let b = sb.apply(&update(&["a=1"], &["nosmt", "audit=1"])).unwrap();
    assert_eq!(b.name(), "grub");
    assert_eq!(
        sb.read(GRUB_DEFAULT),
        GRUB.replace(
            "GRUB_CMDLINE_LINUX=\"console=tty0 a=1\"",
            "GRUB_CMDLINE_LINUX=\"console=tty0 nosmt audit=1\""
        )
    );
    assert_eq!(sb.calls(), [s(&["update-grub"])]);
}

#[test]
fn grub2_mkconfig_writes_the_grub_cfg_that_exists() {
    let sb = Sandbox::new();
    sb.file(GRUB_DEFAULT, "GRUB_TIMEOUT=1\n");
    sb.file("/boot/grub2/grub.cfg", "# generated\n");
    sb.command("grub2-mkconfig", 0);
    sb.apply(&update(&[], &["nosmt"])).unwrap();
    assert_eq!(sb.read(GRUB_DEFAULT), "GRUB_TIMEOUT=1\nGRUB_CMDLINE_LINUX=\"nosmt\"\n");
    assert_eq!(sb.calls(), [s(&["grub2-mkconfig", "-o", "/boot/grub2/grub.cfg"])]);
    // grub-mkconfig where only /boot/grub/grub.cfg exists
    let sb = Sandbox::new();
    sb.file(GRUB_DEFAULT, "GRUB_CMDLINE_LINUX=''");
    sb.file("/boot/grub/grub.cfg", "");
    sb.command("grub-mkconfig", 0);
    sb.apply(&update(&[], &["a=1 b"])).unwrap();
    assert_eq!(sb.read(GRUB_DEFAULT), "GRUB_CMDLINE_LINUX='a=1 b'");
    assert_eq!(sb.calls(), [s(&["grub-mkconfig", "-o", "/boot/grub/grub.cfg"])]);
}

/// grub-mkconfig reads `/etc/default/grub.d/*.cfg` after `/etc/default/grub`: the last file
/// that sets `GRUB_CMDLINE_LINUX` is the one edited (a cloud image's override).
#[test]
fn a_grub_d_file_that_sets_the_command_line_is_the_one_edited() {
    let sb = Sandbox::new();
    sb.file(GRUB_DEFAULT, GRUB);
    sb.file(
        "/etc/default/grub.d/10-cloud.cfg",
        "GRUB_CMDLINE_LINUX=\"console=ttyS0\"\n",
    );
    sb.file("/etc/default/grub.d/50-timeout.cfg", "GRUB_TIMEOUT=0\n");
    sb.command("update-grub", 0);
    let b = sb.apply(&update(&[], &["nosmt"])).unwrap();
    assert!(
        matches!(&b, Backend::Grub { file, .. } if file == "/etc/default/grub.d/10-cloud.cfg"),
        "{b:?}"
    );
    assert_eq!(
        sb.read("/etc/default/grub.d/10-cloud.cfg"),
        "GRUB_CMDLINE_LINUX=\"console=ttyS0 nosmt\"\n"
    );
    assert_eq!(sb.read(GRUB_DEFAULT), GRUB);
    assert_eq!(sb.read("/etc/default/grub.d/50-timeout.cfg"), "GRUB_TIMEOUT=0\n");
}

#[test]
fn a_failed_regeneration_puts_the_file_back() {
    let sb = Sandbox::new();
    sb.file(GRUB_DEFAULT, GRUB);
    sb.command("update-grub", 3);
    let e = sb.apply(&update(&[], &["nosmt"])).unwrap_err();
    assert!(matches!(e, HostError::Command { exit: Some(3), .. }), "{e}");
    assert_eq!(sb.read(GRUB_DEFAULT), GRUB, "restored: a retry does not append twice");
}

#[test]
fn systemd_boot_kernel_install_without_entries() {
    let sb = Sandbox::new();
    sb.file(KERNEL_CMDLINE, "root=/dev/vda1 rw");
    sb.file("/proc/sys/kernel/osrelease", "6.1.0-28-cloud-amd64\n");
    sb.file("/usr/lib/modules/6.1.0-28-cloud-amd64/vmlinuz", "kernel");
    sb.command("kernel-install", 0);
    let b = sb.apply(&update(&[], &["nosmt"])).unwrap();
    assert_eq!(b.name(), "kernel-install");
    assert_eq!(sb.read(KERNEL_CMDLINE), "root=/dev/vda1 rw nosmt");
    assert_eq!(
        sb.calls(),
        [s(&[
            "kernel-install",
            "add",
            "6.1.0-28-cloud-amd64",
            "/usr/lib/modules/6.1.0-28-cloud-amd64/vmlinuz"
        ])]
    );
}

#[test]
fn what_is_missing_is_said() {
    let sb = Sandbox::new();
    let e = detect(&sb.env()).unwrap_err().to_string();
    assert!(
        e.starts_with("no boot loader configuration to set kernel arguments in: no /run/ostree-booted"),
        "{e}"
    );
    assert!(e.contains(&format!("no grubby on PATH ({})", sb.bin.display())), "{e}");
    sb.file(GRUB_DEFAULT, GRUB);
    let e = detect(&sb.env()).unwrap_err().to_string();
    assert!(
        e.starts_with("/etc/default/grub exists but none of update-grub, grub2-mkconfig, grub-mkconfig is on PATH"),
        "{e}"
    );
    let sb = Sandbox::new();
    sb.file(KERNEL_CMDLINE, "ro\n");
    let e = detect(&sb.env()).unwrap_err().to_string();
    assert!(
        e.starts_with("/etc/kernel/cmdline exists but kernel-install is not on PATH"),
        "{e}"
    );
    let sb = Sandbox::new();
    sb.file(OSTREE_BOOTED, "");
    let e = detect(&sb.env()).unwrap_err().to_string();
    assert!(
        e.starts_with("/run/ostree-booted exists but rpm-ostree is not on PATH"),
        "{e}"
    );
}

/// Every edit undone by the reverse update gives the original bytes back (the reboot-failure
/// path stages `desired -> current`).
#[test]
fn add_then_remove_round_trips() {
    let cases = [
        (&["nosmt"][..], &["a=1 b=2", "\"q=x y\""][..]),
        (&["hugepages=1", "hugepages=1"][..], &[][..]),
        (&[][..], &["audit=1"][..]),
    ];
    let entry = "title x\noptions ro quiet\nlinux /v\n";
    let cmdline = "ro quiet\n";
    for (old, new) in cases {
        let (fwd, back) = (update(old, new), update(new, old));
        // start from a file holding `old`
        let start = |text: &str| -> String { edit_bls_entry(text, &update(&[], old)) };
        let e0 = start(entry);
        assert_eq!(
            edit_bls_entry(&edit_bls_entry(&e0, &fwd), &back),
            e0,
            "{old:?} -> {new:?}"
        );
        let c0 = edit_cmdline_file(cmdline, &update(&[], old));
        assert_eq!(edit_cmdline_file(&edit_cmdline_file(&c0, &fwd), &back), c0);
        let g0 = edit_grub_default(GRUB, &update(&["a=1"], old)).unwrap();
        let g1 = edit_grub_default(&g0, &fwd).unwrap();
        assert_eq!(edit_grub_default(&g1, &back).unwrap(), g0);
    }
    // to nothing and back to the very bytes
    let g = edit_grub_default(GRUB, &update(&[], &["nosmt"])).unwrap();
    assert_eq!(edit_grub_default(&g, &update(&["nosmt"], &[])).unwrap(), GRUB);
    assert_eq!(
        edit_bls_entry(&edit_bls_entry(entry, &update(&[], &["x"])), &update(&["x"], &[])),
        entry
    );
}

#[test]
fn duplicates_and_removals_as_mco() {
    // MCO deletes each old argument once and appends each new one, duplicates kept.
    let g = edit_grub_default(
        "GRUB_CMDLINE_LINUX=\"hugepages=1 ro hugepages=1\"\n",
        &update(&["hugepages=1"], &["hugepages=1", "hugepages=1"]),
    )
    .unwrap();
    assert_eq!(g, "GRUB_CMDLINE_LINUX=\"ro hugepages=1 hugepages=1 hugepages=1\"\n");
    // an argument in two options lines: the first occurrence goes
    let e = edit_bls_entry("options a x\noptions x b\n", &update(&["x"], &[]));
    assert_eq!(e, "options a\noptions x b\n");
    // deleting what is absent changes nothing, not even the spacing
    let text = "export   GRUB_CMDLINE_LINUX=\"ro   quiet\"\n";
    assert_eq!(edit_grub_default(text, &update(&["gone"], &[])).unwrap(), text);
}

#[test]
fn grub_values_the_shell_would_read_differently_are_refused() {
    for text in [
        "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX nosmt\"\n",
        "GRUB_CMDLINE_LINUX=`cat /etc/kargs`\n",
        "GRUB_CMDLINE_LINUX=\"ro\n",
    ] {
        assert!(edit_grub_default(text, &update(&[], &["x"])).is_err(), "{text}");
    }
    // escapes are read and written back escaped; the last assignment is the one edited
    let text = "GRUB_CMDLINE_LINUX=\"first\"\nGRUB_CMDLINE_LINUX=\"a=\\\"b c\\\"\"\n";
    assert_eq!(
        edit_grub_default(text, &update(&[], &["d=\\x"])).unwrap(),
        "GRUB_CMDLINE_LINUX=\"first\"\nGRUB_CMDLINE_LINUX=\"a=\\\"b c\\\" d=\\\\x\"\n"
    );
}

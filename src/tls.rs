//! TLS for the API and the Machine Config Server: the generated PKI, the serving certificate
//! reloaded from disk, and the clients' trust in the CA.
//!
//! Owns the on-disk PKI (`<data-dir>/pki/`: `ca.crt`, `ca.key`, `server.crt`, `server.key`,
//! `server.sans`; the directory 0700, the keys 0600), generated with rcgen: an ECDSA P-256 CA
//! (`CN=mco-ca`, 10 years) and a serving certificate it signs (`CN=mco-server`, 1 year,
//! `serverAuth`) for `127.0.0.1`, `::1`, `localhost`, the host name and every `--tls-san`.
//! The CA is generated once and reused; the serving certificate is issued again when the SANs
//! asked for change or when it is missing. Serving: [`ReloadingCert`] is rustls'
//! `ResolvesServerCert` over an `Arc` swapped when the files' contents change (checked every
//! [`RELOAD_INTERVAL`]), so a renewed certificate is served to new connections without a
//! restart; files that do not load (half-written, key not matching) keep the old one and log a
//! warning. Clients: [`client_config`] trusts exactly the given CA (no system roots).
//!
//! It must not decide who may listen where (see [`check_listen`] for the one rule) nor talk
//! HTTP: the accept loop is `api::listen`.

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// The PKI directory under a data dir.
pub const PKI_DIR: &str = "pki";
/// The CA certificate (PEM): what kubectl (`certificate-authority-data`) and daemons
/// (`--ca-file`) trust.
pub const CA_CERT: &str = "ca.crt";
/// The CA's private key (PEM, PKCS#8), mode 0600.
pub const CA_KEY: &str = "ca.key";
/// The serving certificate (PEM).
pub const SERVER_CERT: &str = "server.crt";
/// The serving certificate's private key (PEM, PKCS#8), mode 0600.
pub const SERVER_KEY: &str = "server.key";
/// The SANs the serving certificate was issued for, one a line (so a new `--tls-san` issues a
/// new certificate).
pub const SERVER_SANS: &str = "server.sans";

/// How often [`ReloadingCert::watch`] re-reads the certificate files.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// Validity of the CA, in days.
pub const CA_DAYS: i64 = 3650;
/// Validity of a serving certificate, in days.
pub const SERVER_DAYS: i64 = 365;

/// The files of a generated PKI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pki {
    pub dir: PathBuf,
}

impl Pki {
    /// The PKI of a data dir (`<data-dir>/pki`).
    pub fn in_data_dir(data_dir: &Path) -> Pki {
        Pki {
            dir: data_dir.join(PKI_DIR),
        }
    }
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.join(CA_CERT)
    }
    pub fn ca_key(&self) -> PathBuf {
        self.dir.join(CA_KEY)
    }
    pub fn server_cert(&self) -> PathBuf {
        self.dir.join(SERVER_CERT)
    }
    pub fn server_key(&self) -> PathBuf {
        self.dir.join(SERVER_KEY)
    }
    /// The serving certificate and key, as [`TlsFiles`].
    pub fn serving(&self) -> TlsFiles {
        TlsFiles {
            cert: self.server_cert(),
            key: self.server_key(),
        }
    }
    /// Whether a serving certificate and key are there (`mco server` serves TLS with them).
    pub fn has_serving(&self) -> bool {
        self.server_cert().is_file() && self.server_key().is_file()
    }
}

/// What [`ensure_pki`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PkiReport {
    /// A new CA was generated (none was there).
    pub new_ca: bool,
    /// A new serving certificate was issued (none was there, or the SANs changed).
    pub new_serving: bool,
    /// The serving certificate's SANs.
    pub sans: Vec<String>,
}

/// The SANs of a serving certificate: `127.0.0.1`, `::1`, `localhost`, the host name
/// (`/proc/sys/kernel/hostname`), then `extra` (`--tls-san`), without duplicates.
pub fn default_sans(extra: &[String]) -> Vec<String> {
    let mut sans: Vec<String> = ["127.0.0.1", "::1", "localhost"].map(String::from).into();
    if let Ok(h) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let h = h.trim();
        if !h.is_empty() {
            sans.push(h.to_string());
        }
    }
    sans.extend(extra.iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()));
    let mut seen = std::collections::HashSet::new();
    sans.retain(|s| seen.insert(s.clone()));
    sans
}

/// A DNS name as a certificate may hold (RFC 1123 labels of letters, digits and `-`, at most
/// 63 characters each, 253 in all; a leading `*.` wildcard label).
fn is_dns_name(s: &str) -> bool {
    let rest = s.strip_prefix("*.").unwrap_or(s);
    s.len() <= 253
        && !rest.is_empty()
        && rest.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// Creates `dir` (and parents) and makes it owner-only (0700).
pub fn private_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("making {} owner-only", dir.display()))
}

/// Writes `bytes` to `path` with `mode` through [`crate::fsutil::atomic_write`] (the file never
/// exists with wider permissions), naming the path in the error.
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    crate::fsutil::atomic_write(path, bytes, mode).with_context(|| format!("writing {}", path.display()))
}

/// The CA's parameters. Deterministic from its key (subject `CN=mco-ca-<8 hex of the SHA-256
/// of its public key>`, so two installations' CAs never share a name; key usages), so the
/// issuer of a serving certificate can be rebuilt from them and the CA's key alone.
fn ca_params(key: &rcgen::KeyPair, days: i64) -> anyhow::Result<rcgen::CertificateParams> {
    use sha2::Digest;
    let id = hex::encode(&sha2::Sha256::digest(key.public_key_raw())[..4]);
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new())?;
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name
        .push(rcgen::DnType::CommonName, format!("mco-ca-{id}"));
    p.distinguished_name.push(rcgen::DnType::OrganizationName, "mco");
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    validity(&mut p, days);
    Ok(p)
}

/// From one hour ago (clock skew) to `days` from now.
fn validity(p: &mut rcgen::CertificateParams, days: i64) {
    let ymd = |t: jiff::Timestamp| {
        let d = t.to_zoned(jiff::tz::TimeZone::UTC).date();
        rcgen::date_time_ymd(d.year() as i32, d.month() as u8, d.day() as u8)
    };
    let now = jiff::Timestamp::now();
    p.not_before = ymd(now - jiff::SignedDuration::from_hours(24));
    p.not_after = ymd(now + jiff::SignedDuration::from_hours(24 * days));
}

/// Generates what is missing of the PKI in `pki.dir`: a CA when there is none, a serving
/// certificate signed by it when there is none or when it was issued for other SANs than
/// [`default_sans`]`(extra_sans)`. The directory is made 0700, keys 0600, certificates 0644.
///
/// Errors: unreadable or unparsable existing keys, or a write failing (each names its file).
pub fn ensure_pki(pki: &Pki, extra_sans: &[String]) -> anyhow::Result<PkiReport> {
    private_dir(&pki.dir)?;
    let mut report = PkiReport {
        sans: default_sans(extra_sans),
        ..Default::default()
    };
    let ca_key = if pki.ca_cert().is_file() && pki.ca_key().is_file() {
        let pem =
            std::fs::read_to_string(pki.ca_key()).with_context(|| format!("reading {}", pki.ca_key().display()))?;
        rcgen::KeyPair::from_pem(&pem).with_context(|| format!("{} is not a private key", pki.ca_key().display()))?
    } else {
        let key = rcgen::KeyPair::generate()?;
        let cert = ca_params(&key, CA_DAYS)?.self_signed(&key)?;
        write_file(&pki.ca_key(), key.serialize_pem().as_bytes(), 0o600)?;
        write_file(&pki.ca_cert(), cert.pem().as_bytes(), 0o644)?;
        report.new_ca = true;
        key
    };
    let sans_file = pki.dir.join(SERVER_SANS);
    let wanted = report.sans.join("\n") + "\n";
    let have = std::fs::read_to_string(&sans_file).unwrap_or_default();
    if report.new_ca || !pki.has_serving() || have != wanted {
        let issuer = rcgen::Issuer::new(ca_params(&ca_key, CA_DAYS)?, ca_key);
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new())?;
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(rcgen::DnType::CommonName, "mco-server");
        p.distinguished_name.push(rcgen::DnType::OrganizationName, "mco");
        for s in &report.sans {
            let bad = || anyhow::anyhow!("--tls-san {s:?} is neither an IP address nor a DNS name");
            p.subject_alt_names.push(match s.parse::<IpAddr>() {
                Ok(ip) => rcgen::SanType::IpAddress(ip),
                Err(_) if is_dns_name(s) => rcgen::SanType::DnsName(s.clone().try_into().map_err(|_| bad())?),
                Err(_) => return Err(bad()),
            });
        }
        p.key_usages = vec![
            rcgen::KeyUsagePurpose::DigitalSignature,
            rcgen::KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        p.use_authority_key_identifier_extension = true;
        validity(&mut p, SERVER_DAYS);
        let key = rcgen::KeyPair::generate()?;
        let cert = p.signed_by(&key, &issuer)?;
        // The key first: a reader seeing the new certificate finds its key already there.
        write_file(&pki.server_key(), key.serialize_pem().as_bytes(), 0o600)?;
        write_file(&pki.server_cert(), cert.pem().as_bytes(), 0o644)?;
        write_file(&sans_file, wanted.as_bytes(), 0o644)?;
        report.new_serving = true;
    }
    Ok(report)
}

/// Makes the CA of another installation (`ca_cert`, `ca_key`: the `pki/ca.crt` and
/// `pki/ca.key` of the first replica's `mco server init`) this data dir's CA, so that
/// [`ensure_pki`] issues this replica's serving certificate from it and every replica's
/// certificate verifies against the one `ca.crt` clients and nodes trust. Returns whether the
/// CA was copied (`false`: the same CA is already there).
///
/// Errors: a file that does not read or parse; a key that is not the certificate's CA key (a
/// certificate issued with it must verify against the certificate: only a CA `mco server init`
/// or `mco up` made does, its subject being derived from its key); a different CA already in
/// `<data-dir>/pki` (never replaced: certificates issued from it would stop verifying). On an
/// error nothing of the new CA is left in the data dir.
pub fn adopt_ca(pki: &Pki, ca_cert: &Path, ca_key: &Path) -> anyhow::Result<bool> {
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    let (cert_pem, key_pem) = (read(ca_cert)?, read(ca_key)?);
    if let (Ok(have_cert), Ok(have_key)) = (std::fs::read(pki.ca_cert()), std::fs::read(pki.ca_key())) {
        anyhow::ensure!(
            have_cert == cert_pem && have_key == key_pem,
            "{} already holds another CA: refusing to replace it (the certificates it issued would stop verifying);              use a new --data-dir",
            pki.dir.display()
        );
        return Ok(false);
    }
    let key = rcgen::KeyPair::from_pem(&String::from_utf8_lossy(&key_pem))
        .with_context(|| format!("--ca-key {} is not a PEM private key", ca_key.display()))?;
    let roots = Trust::from_file(ca_cert)?.roots()?;
    // A certificate issued as ensure_pki issues one must verify against the given certificate.
    let issuer = rcgen::Issuer::new(ca_params(&key, CA_DAYS)?, key);
    let mut p = rcgen::CertificateParams::new(vec!["localhost".to_string()])?;
    p.use_authority_key_identifier_extension = true;
    validity(&mut p, 1);
    let probe = p.signed_by(&rcgen::KeyPair::generate()?, &issuer)?;
    use rustls::client::danger::ServerCertVerifier as _;
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider()).build()?;
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("a valid name");
    verifier
        .verify_server_cert(probe.der(), &[], &name, &[], rustls::pki_types::UnixTime::now())
        .map_err(|e| {
            anyhow::anyhow!(
                "--ca-key {} does not issue certificates that verify against --ca-cert {} ({e}): give the ca.crt and \
                 ca.key of the same `mco server init`",
                ca_key.display(),
                ca_cert.display()
            )
        })?;
    private_dir(&pki.dir)?;
    write_file(&pki.ca_key(), &key_pem, 0o600)?;
    if let Err(e) = write_file(&pki.ca_cert(), &cert_pem, 0o644) {
        let _ = std::fs::remove_file(pki.ca_key());
        return Err(e);
    }
    // A serving certificate of an earlier CA would not verify against this one.
    for stale in [pki.server_cert(), pki.server_key(), pki.dir.join(SERVER_SANS)] {
        let _ = std::fs::remove_file(stale);
    }
    Ok(true)
}

/// A serving certificate and its key, PEM files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first (`--tls-cert`).
    pub cert: PathBuf,
    /// Its private key (`--tls-key`): PKCS#8, PKCS#1 or SEC1.
    pub key: PathBuf,
}

/// The crypto provider of every TLS config here (ring).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Loads a certificate chain and key, checking that the key belongs to the certificate.
fn load_certified(cert_pem: &[u8], key_pem: &[u8], files: &TlsFiles) -> anyhow::Result<CertifiedKey> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .with_context(|| format!("{} is not a PEM certificate chain", files.cert.display()))?;
    anyhow::ensure!(!chain.is_empty(), "{} holds no certificate", files.cert.display());
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .with_context(|| format!("{} is not a PEM private key", files.key.display()))?;
    let ck = CertifiedKey::from_der(chain, key, &provider())
        .with_context(|| format!("{} does not match {}", files.key.display(), files.cert.display()))?;
    Ok(ck)
}

/// The serving certificate, reloaded when its files change. rustls asks it for the
/// certificate at every handshake, so a swap reaches every new connection; open connections
/// keep the one they were made with.
pub struct ReloadingCert {
    files: TlsFiles,
    current: RwLock<Arc<CertifiedKey>>,
    /// The files' contents last loaded (or tried): a change is a difference in bytes.
    seen: Mutex<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingCert").field("files", &self.files).finish()
    }
}

impl ReloadingCert {
    /// Loads `files`. Errors name the file that does not read or parse.
    pub fn load(files: TlsFiles) -> anyhow::Result<Arc<ReloadingCert>> {
        let cert = std::fs::read(&files.cert).with_context(|| format!("reading {}", files.cert.display()))?;
        let key = std::fs::read(&files.key).with_context(|| format!("reading {}", files.key.display()))?;
        let ck = load_certified(&cert, &key, &files)?;
        Ok(Arc::new(ReloadingCert {
            files,
            current: RwLock::new(Arc::new(ck)),
            seen: Mutex::new((cert, key)),
        }))
    }

    /// Re-reads the files; when their contents changed and load, the new certificate is
    /// served from now on (`Ok(true)`). Contents that do not load are kept as seen (not tried
    /// again until they change) and the old certificate stays (`Err`).
    pub fn reload_if_changed(&self) -> anyhow::Result<bool> {
        let cert = std::fs::read(&self.files.cert).with_context(|| format!("reading {}", self.files.cert.display()))?;
        let key = std::fs::read(&self.files.key).with_context(|| format!("reading {}", self.files.key.display()))?;
        let mut seen = self.seen.lock().expect("seen lock");
        if seen.0 == cert && seen.1 == key {
            return Ok(false);
        }
        let loaded = load_certified(&cert, &key, &self.files);
        *seen = (cert, key);
        let ck = loaded?;
        *self.current.write().expect("cert lock") = Arc::new(ck);
        Ok(true)
    }

    /// Checks the files every `interval` until `stop`, logging each reload and each failure.
    pub async fn watch(self: Arc<Self>, interval: Duration, stop: tokio_util::sync::CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            let me = self.clone();
            match tokio::task::spawn_blocking(move || me.reload_if_changed()).await {
                Ok(Ok(true)) => tracing::info!(cert = %self.files.cert.display(), "serving certificate reloaded"),
                Ok(Ok(false)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %format!("{e:#}"), "serving certificate not reloaded; the previous one stays")
                }
                Err(_) => return,
            }
        }
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().expect("cert lock").clone())
    }
}

/// The rustls server config: TLS 1.2 and 1.3, no client certificates, ALPN `h2` then
/// `http/1.1` (kubectl speaks HTTP/2 when offered), the certificate from `cert`.
pub fn server_config(cert: Arc<ReloadingCert>) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(cert);
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// A CA bundle clients trust: PEM bytes and where they came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trust {
    /// One or more PEM certificates.
    pub pem: Vec<u8>,
    /// The file they were read from (for messages).
    pub source: String,
}

impl Trust {
    /// Reads a PEM CA bundle (`--ca-file`, `--certificate-authority`).
    pub fn from_file(path: &Path) -> anyhow::Result<Trust> {
        let pem = std::fs::read(path).with_context(|| format!("reading the CA file {}", path.display()))?;
        let t = Trust {
            pem,
            source: path.display().to_string(),
        };
        t.roots()?;
        Ok(t)
    }

    /// The certificates as a rustls root store. Errors when there are none or one does not
    /// parse.
    pub fn roots(&self) -> anyhow::Result<rustls::RootCertStore> {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&self.pem) {
            let c = c.with_context(|| format!("{} is not a PEM certificate bundle", self.source))?;
            roots
                .add(c)
                .with_context(|| format!("{}: a certificate is not a usable CA", self.source))?;
        }
        anyhow::ensure!(!roots.is_empty(), "{} holds no certificate", self.source);
        Ok(roots)
    }
}

/// A rustls client config that trusts exactly `trust`'s CAs (no system roots); ALPN `h2` and
/// `http/1.1`. Without a trust, no server certificate verifies (an `https://` URL then fails
/// with "invalid peer certificate: UnknownIssuer").
pub fn client_config(trust: Option<&Trust>) -> anyhow::Result<rustls::ClientConfig> {
    let roots = match trust {
        Some(t) => t.roots()?,
        None => rustls::RootCertStore::empty(),
    };
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

/// Why [`check_listen`] refuses an address.
pub const INSECURE_LISTEN_FLAG: &str = "--allow-insecure-listen";

/// The listen rule: an address other than loopback (`127.0.0.0/8`, `::1`) must serve TLS (every
/// request is authenticated, always), else it is refused unless `allow_insecure` (then a warning
/// is logged). The error names the address, what is missing and the flag.
pub fn check_listen(listen: SocketAddr, tls: bool, allow_insecure: bool) -> anyhow::Result<()> {
    if listen.ip().is_loopback() || tls {
        return Ok(());
    }
    if allow_insecure {
        tracing::warn!(%listen, "serving a non-loopback address without TLS ({INSECURE_LISTEN_FLAG})");
        return Ok(());
    }
    anyhow::bail!(
        "refusing to listen on {listen} without TLS: anyone who can reach it could read or change every \
         machine config (the tokens travel in clear); serve TLS (`mco up` does unless given --no-tls; `mco server` with \
         --tls-cert/--tls-key, or after `mco server init`), listen on loopback, or pass {INSECURE_LISTEN_FLAG} \
         to do it anyway"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier;

    #[test]
    fn generated_pki_is_owner_only_reused_and_reissued_for_new_sans() {
        let tmp = tempfile::tempdir().unwrap();
        let pki = Pki::in_data_dir(tmp.path());
        let r = ensure_pki(&pki, &[]).unwrap();
        assert!(r.new_ca && r.new_serving);
        for s in ["127.0.0.1", "::1", "localhost"] {
            assert!(r.sans.iter().any(|x| x == s), "{:?}", r.sans);
        }
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&pki.dir), 0o700);
        assert_eq!(mode(&pki.ca_key()), 0o600);
        assert_eq!(mode(&pki.server_key()), 0o600);
        let ca = std::fs::read(pki.ca_cert()).unwrap();
        let served = std::fs::read(pki.server_cert()).unwrap();
        // Second start: everything reused.
        let r = ensure_pki(&pki, &[]).unwrap();
        assert!(!r.new_ca && !r.new_serving);
        assert_eq!(std::fs::read(pki.server_cert()).unwrap(), served);
        // A new SAN: same CA, new serving certificate.
        let r = ensure_pki(&pki, &["mco.example.com".into(), "10.1.2.3".into()]).unwrap();
        assert!(!r.new_ca && r.new_serving);
        assert_eq!(std::fs::read(pki.ca_cert()).unwrap(), ca);
        assert_ne!(std::fs::read(pki.server_cert()).unwrap(), served);
        // The serving certificate verifies against the CA for each SAN, and its key matches.
        let trust = Trust::from_file(&pki.ca_cert()).unwrap();
        let roots = Arc::new(trust.roots().unwrap());
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider())
            .build()
            .unwrap();
        let cert = ReloadingCert::load(pki.serving()).unwrap();
        let ck = cert.current.read().unwrap().clone();
        for name in ["localhost", "127.0.0.1", "mco.example.com", "10.1.2.3", "::1"] {
            let sn = rustls::pki_types::ServerName::try_from(name).unwrap();
            verifier
                .verify_server_cert(&ck.cert[0], &[], &sn, &[], rustls::pki_types::UnixTime::now())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let sn = rustls::pki_types::ServerName::try_from("other.example.com").unwrap();
        assert!(verifier
            .verify_server_cert(&ck.cert[0], &[], &sn, &[], rustls::pki_types::UnixTime::now())
            .is_err());
        assert!(ensure_pki(&pki, &["bad name!".into()]).is_err());
    }

    /// A second replica's serving certificate, issued from the first replica's CA, verifies
    /// against the first's `ca.crt`; a key of another CA, or another CA already in the data
    /// dir, is refused and leaves nothing behind.
    #[test]
    fn a_replica_issues_its_serving_certificate_from_an_adopted_ca() {
        let first = tempfile::tempdir().unwrap();
        let a = Pki::in_data_dir(first.path());
        ensure_pki(&a, &[]).unwrap();
        let second = tempfile::tempdir().unwrap();
        let b = Pki::in_data_dir(second.path());
        assert!(adopt_ca(&b, &a.ca_cert(), &a.ca_key()).unwrap());
        assert!(
            !adopt_ca(&b, &a.ca_cert(), &a.ca_key()).unwrap(),
            "the same CA again: kept"
        );
        let r = ensure_pki(&b, &["10.0.0.12".into()]).unwrap();
        assert!(!r.new_ca && r.new_serving);
        assert_eq!(std::fs::read(b.ca_cert()).unwrap(), std::fs::read(a.ca_cert()).unwrap());
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(b.ca_key()).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let roots = Arc::new(Trust::from_file(&a.ca_cert()).unwrap().roots().unwrap());
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider())
            .build()
            .unwrap();
        let ck = ReloadingCert::load(b.serving())
            .unwrap()
            .current
            .read()
            .unwrap()
            .clone();
        let sn = rustls::pki_types::ServerName::try_from("10.0.0.12").unwrap();
        verifier
            .verify_server_cert(&ck.cert[0], &[], &sn, &[], rustls::pki_types::UnixTime::now())
            .expect("the replica's certificate verifies against the first replica's CA");

        // Another installation's key with this CA certificate: refused, nothing written.
        let other = tempfile::tempdir().unwrap();
        let o = Pki::in_data_dir(other.path());
        ensure_pki(&o, &[]).unwrap();
        let third = tempfile::tempdir().unwrap();
        let c = Pki::in_data_dir(third.path());
        let err = adopt_ca(&c, &a.ca_cert(), &o.ca_key()).unwrap_err().to_string();
        assert!(
            err.contains("does not issue certificates that verify against --ca-cert"),
            "{err}"
        );
        assert!(!c.ca_cert().exists() && !c.ca_key().exists());
        // A data dir with a CA of its own keeps it.
        let err = adopt_ca(&o, &a.ca_cert(), &a.ca_key()).unwrap_err().to_string();
        assert!(err.contains("already holds another CA"), "{err}");
    }

    #[test]
    fn reload_swaps_only_on_a_loadable_change() {
        let tmp = tempfile::tempdir().unwrap();
        let pki = Pki::in_data_dir(tmp.path());
        ensure_pki(&pki, &[]).unwrap();
        let cert = ReloadingCert::load(pki.serving()).unwrap();
        let first = cert.current.read().unwrap().cert[0].clone();
        assert!(!cert.reload_if_changed().unwrap());
        // A half-written certificate: refused, the old one stays.
        std::fs::write(pki.server_cert(), b"-----BEGIN CERTIFICATE-----\nAAAA").unwrap();
        assert!(cert.reload_if_changed().is_err());
        assert_eq!(cert.current.read().unwrap().cert[0], first);
        // A new pair: served.
        ensure_pki(&pki, &["new.example.com".into()]).unwrap();
        assert!(cert.reload_if_changed().unwrap());
        assert_ne!(cert.current.read().unwrap().cert[0], first);
    }

    #[test]
    fn listen_rule() {
        let lo: SocketAddr = "127.0.0.1:7443".parse().unwrap();
        let lo6: SocketAddr = "[::1]:7443".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:7443".parse().unwrap();
        assert!(check_listen(lo, false, false).is_ok());
        assert!(check_listen(lo6, false, false).is_ok());
        assert!(check_listen(any, true, false).is_ok());
        let e = check_listen(any, false, false).unwrap_err().to_string();
        assert!(e.contains("refusing to listen on 0.0.0.0:7443 without TLS:"), "{e}");
        assert!(e.contains(INSECURE_LISTEN_FLAG), "{e}");
        assert!(check_listen(any, false, true).is_ok());
    }
}

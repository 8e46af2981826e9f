//! The etcd v3 backend of the event log: where the log is durable when the control plane must
//! outlive one machine (`mco server --store etcd://HOST:PORT[,HOST:PORT…]`).
//!
//! Owns the connection to the cluster, the writer's lease (one mco server writes under a
//! prefix at a time, and every write it makes compares its lease key: a server that lost it
//! can never write again), committing a batch of records as etcd transactions guarded on the
//! log's head, reading the log back, and compaction under mco's own retention. The layout and
//! the pure steps are in [`layout`]. It must not decode events: [`crate::store::Store`] checks
//! every record it reads (CRC, envelope, seq continuity) as it does sled's.
//!
//! Why this shape: seq stays the resourceVersion because an append is one transaction that
//! compares the head key with the seq the writer expects (a lost race is a typed conflict,
//! [`crate::store::StoreError::HeadMoved`]). A batch larger than one transaction allows (etcd's
//! 1.5 MiB request and 128-operation defaults) is written after a *claim* on the head and
//! committed by one last transaction that moves the head: readers read up to the head only, so
//! a batch cut short is never seen, and the next writer clears what it left. Each replica
//! derives the per-object index and the time-travel snapshots locally from the log (they are
//! derived data, and a snapshot of a large fleet is larger than an etcd value); only the
//! snapshot at a compaction's cut is stored in etcd, since the events before it are gone.
//!
//! etcd's own MVCC history is not mco's retention: mco deletes the events before its cut (so
//! the keyspace holds only the retained log), and etcd keeps the old revisions until etcd's
//! compaction (`--auto-compaction-retention`) and `etcdctl defrag` reclaim them (README).
//!
//! Failpoints: `store::etcd::between_transactions` (a multi-transaction batch cut short).

pub mod layout;
mod lease;

use crate::event::SCHEMA_VERSION;
use crate::store::StoreError;
use etcd_client::{Client, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions, Txn, TxnOp};
use layout::{Head, Keys, Record};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The default `--etcd-prefix`.
pub const DEFAULT_PREFIX: &str = "/mco/";

/// The default time to live of the writer's lease, in seconds: a standby server takes over at
/// most this long after the writer stopped renewing it (renewals go every third of it, so a
/// killed writer's lease runs out 2.7 to 4 s after the kill). kube-controller-manager's lease
/// is 15 s; mco's is shorter so that a failover, kill to the new leader's first write, stays
/// within 5 s (issue 26: `benches/failover.sh` measures it over 20 trials).
pub const DEFAULT_LEASE_TTL_SECS: i64 = 4;

/// How often a standby asks etcd whether the writer's lease is free.
pub const STANDBY_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// How to reach the etcd cluster that holds the log, and who this server is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdConfig {
    /// `HOST:PORT` of each member (`--store etcd://HOST:PORT[,HOST:PORT…]`).
    pub endpoints: Vec<String>,
    /// Where mco's keys live (`--etcd-prefix`, default [`DEFAULT_PREFIX`]).
    pub prefix: String,
    /// The CA that signed the members' serving certificates (`--etcd-cacert`): TLS when set.
    pub ca_file: Option<PathBuf>,
    /// A client certificate and its key, for members that require one (`--etcd-cert`,
    /// `--etcd-key`).
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// This server's name in the writer key (`--name`).
    pub name: String,
    /// The writer lease's time to live, in seconds (at least 2).
    pub lease_ttl_secs: i64,
    /// The deadline of one request to etcd.
    pub request_timeout: Duration,
}

impl EtcdConfig {
    /// Parses `etcd://HOST:PORT[,HOST:PORT…]`. Errors name what is wrong with the URL.
    pub fn parse(url: &str, name: &str) -> Result<EtcdConfig, String> {
        let rest = url
            .strip_prefix("etcd://")
            .ok_or_else(|| format!("--store {url:?}: expected etcd://HOST:PORT[,HOST:PORT…]"))?;
        let endpoints: Vec<String> = rest
            .split(',')
            .map(|e| e.trim().trim_end_matches('/').to_string())
            .collect();
        for e in &endpoints {
            let ok = e
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !ok {
                return Err(format!("--store {url:?}: {e:?} is not HOST:PORT"));
            }
        }
        Ok(EtcdConfig {
            endpoints,
            prefix: DEFAULT_PREFIX.to_string(),
            ca_file: None,
            client_cert: None,
            name: name.to_string(),
            lease_ttl_secs: DEFAULT_LEASE_TTL_SECS,
            request_timeout: Duration::from_secs(5),
        })
    }

    /// The gRPC URLs of the members (`https://` with a CA, else `http://`).
    pub fn urls(&self) -> Vec<String> {
        let scheme = if self.ca_file.is_some() { "https" } else { "http" };
        self.endpoints.iter().map(|e| format!("{scheme}://{e}")).collect()
    }
}

/// The writer's hold on the prefix: its lease and the revision that created its writer key
/// (every write compares it).
#[derive(Clone, Copy, Debug)]
struct Fence {
    lease: i64,
    created: i64,
}

/// A connection to the log in etcd. Runs its requests on a small runtime of its own, so that
/// the store's synchronous callers (compaction on the blocking pool) and its asynchronous ones
/// (the flush) share one client.
pub struct EtcdLog {
    _rt: OwnRuntime,
    handle: tokio::runtime::Handle,
    client: Client,
    keys: Keys,
    config: EtcdConfig,
    fence: OnceLock<Fence>,
    /// Set when the lease could not be renewed before it expired: this server may no longer
    /// write (its writes would be refused by the fence anyway).
    lost: Arc<AtomicBool>,
    lost_tx: tokio::sync::watch::Sender<bool>,
    /// Commits run one at a time, even when the caller that started one went away.
    commit_lock: Arc<tokio::sync::Mutex<()>>,
    /// When the lease was last renewed, in ms after `started` ([`EtcdLog::unready`]).
    renewed_ms: Arc<std::sync::atomic::AtomicU64>,
    started: std::time::Instant,
}

/// The client's runtime, shut down without waiting when dropped (allowed inside an async
/// context, unlike dropping a runtime).
struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// What the keyspace says about the log when it is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The store schema recorded (`None`: nothing written yet).
    pub schema: Option<u32>,
    /// The head.
    pub head: Head,
    /// The first seq retained after a compaction (0: never compacted).
    pub compacted_before: u64,
}

fn etcd_error(e: etcd_client::Error) -> StoreError {
    StoreError::Etcd(e.to_string())
}

fn key_str(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

impl EtcdLog {
    /// Connects to the cluster (no write yet). Errors: [`StoreError::Etcd`] when no member
    /// answers within the request timeout, or the TLS files cannot be read.
    pub async fn connect(config: EtcdConfig) -> Result<Arc<EtcdLog>, StoreError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("mco-etcd")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Etcd(format!("starting the etcd client's runtime: {e}")))?;
        let handle = rt.handle().clone();
        let rt = OwnRuntime(Some(rt));
        let mut options = ConnectOptions::new()
            .with_timeout(config.request_timeout)
            .with_connect_timeout(config.request_timeout)
            .with_keep_alive(Duration::from_secs(2), config.request_timeout);
        if let Some(ca) = &config.ca_file {
            let read = |p: &PathBuf| std::fs::read(p).map_err(|e| StoreError::Etcd(format!("{}: {e}", p.display())));
            let mut tls = etcd_client::TlsOptions::new().ca_certificate(etcd_client::Certificate::from_pem(read(ca)?));
            if let Some((cert, key)) = &config.client_cert {
                tls = tls.identity(etcd_client::Identity::from_pem(read(cert)?, read(key)?));
            }
            options = options.with_tls(tls);
        }
        let urls = config.urls();
        let client = handle
            .spawn(async move {
                let mut client = Client::connect(urls, Some(options)).await?;
                // A connection is lazy: ask once, so that an unreachable cluster fails here.
                client.status().await?;
                Ok::<_, etcd_client::Error>(client)
            })
            .await
            .map_err(|e| StoreError::Etcd(e.to_string()))?
            .map_err(|e| {
                StoreError::Etcd(format!(
                    "no etcd member answered at {} ({e})",
                    config.endpoints.join(",")
                ))
            })?;
        let (lost_tx, _) = tokio::sync::watch::channel(false);
        Ok(Arc::new(EtcdLog {
            _rt: rt,
            handle,
            client,
            keys: Keys::new(&config.prefix),
            config,
            fence: OnceLock::new(),
            lost: Arc::default(),
            lost_tx,
            commit_lock: Arc::default(),
            renewed_ms: Arc::default(),
            started: std::time::Instant::now(),
        }))
    }

    /// The configuration it was opened with.
    pub fn config(&self) -> &EtcdConfig {
        &self.config
    }

    /// The key layout.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Runs `f` with a client on the log's runtime and waits for it (from any runtime).
    async fn run<T, F, Fut>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        self.handle
            .spawn(f(self.client.clone()))
            .await
            .map_err(|e| StoreError::Etcd(format!("the etcd request failed: {e}")))?
    }

    /// [`EtcdLog::run`] for a synchronous caller (one off the async workers: the blocking pool
    /// or a thread of its own).
    pub fn run_blocking<T, F, Fut>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let fut = f(self.client.clone());
        self.handle.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv()
            .map_err(|_| StoreError::Etcd("the etcd client's runtime stopped".to_string()))?
    }

    /// The schema, head and cut, read in one transaction (one consistent revision).
    pub async fn meta(&self) -> Result<Meta, StoreError> {
        let k = self.keys.clone();
        self.run(move |mut c| async move {
            let events = format!("{}events/", k.prefix()).into_bytes();
            let newest = GetOptions::new()
                .with_prefix()
                .with_sort(etcd_client::SortTarget::Key, etcd_client::SortOrder::Descend)
                .with_limit(1)
                .with_keys_only();
            let txn = Txn::new().and_then([
                TxnOp::get(k.schema(), None),
                TxnOp::get(k.head(), None),
                TxnOp::get(k.compacted_before(), None),
                TxnOp::get(events, Some(newest)),
            ]);
            let resp = c.txn(txn).await.map_err(etcd_error)?;
            let firsts: Vec<Option<(Vec<u8>, Vec<u8>)>> = resp
                .op_responses()
                .into_iter()
                .map(|r| match r {
                    etcd_client::TxnOpResponse::Get(g) => {
                        g.kvs().first().map(|kv| (kv.key().to_vec(), kv.value().to_vec()))
                    }
                    _ => None,
                })
                .collect();
            let values: Vec<Option<Vec<u8>>> = firsts.iter().map(|f| f.as_ref().map(|kv| kv.1.clone())).collect();
            let newest_event = firsts
                .get(3)
                .cloned()
                .flatten()
                .and_then(|(key, _)| k.parse_event(&key))
                .map(|(seq, _)| seq);
            let bad = |key: Vec<u8>, what: String| StoreError::Corrupt {
                seq: 0,
                tree: "etcd",
                what: format!("{}: {what}", key_str(&key)),
            };
            let schema = match values.first().cloned().flatten() {
                None => None,
                Some(v) => {
                    Some(u32::from_be_bytes(v.as_slice().try_into().map_err(|_| {
                        bad(k.schema(), format!("{} bytes where 4 were expected", v.len()))
                    })?))
                }
            };
            let head = Head::decode(values.get(1).cloned().flatten().as_deref()).map_err(|e| bad(k.head(), e))?;
            // Records above the head are a batch under way or cut short (the head holds its
            // claim); without a claim they mean the head was changed or deleted: refuse, rather
            // than serve (or export) a log that looks shorter than it is.
            if let Some(newest) = newest_event.filter(|n| *n > head.seq && head.claim.is_none()) {
                return Err(StoreError::Corrupt {
                    seq: head.seq + 1,
                    tree: "etcd",
                    what: format!(
                        "the head key {} says the log ends at resourceVersion {} ({}), but records up to {newest} are stored: \
                         the head was changed or deleted",
                        key_str(&k.head()),
                        head.seq,
                        if values.get(1).cloned().flatten().is_some() { "present" } else { "absent" }
                    ),
                });
            }
            Ok(Meta {
                schema,
                head,
                compacted_before: layout::decode_u64(values.get(2).cloned().flatten().as_deref())
                    .map_err(|e| bad(k.compacted_before(), e))?,
            })
        })
        .await
    }

    /// Prepares the keyspace for writing, as the writer: records the schema and an empty head
    /// on a new prefix, refuses a schema newer than this build, and clears a batch a previous
    /// writer left cut short (its claim on the head, and whatever it wrote above the head).
    /// Returns the meta as it stands after.
    pub async fn prepare(&self) -> Result<Meta, StoreError> {
        let meta = self.meta().await?;
        if let Some(found) = meta.schema.filter(|s| *s > SCHEMA_VERSION) {
            return Err(StoreError::SchemaTooNew { found });
        }
        let fence = self.fence()?;
        let k = self.keys.clone();
        if meta.schema.is_none() {
            let fence = fence.clone();
            self.run(move |mut c| async move {
                let txn = Txn::new()
                    .when([Compare::create_revision(k.schema(), CompareOp::Equal, 0), fence])
                    .and_then([
                        TxnOp::put(k.schema(), SCHEMA_VERSION.to_be_bytes().to_vec(), None),
                        TxnOp::put(k.head(), Head { seq: 0, claim: None }.encode(), None),
                    ]);
                c.txn(txn).await.map_err(etcd_error)?;
                Ok(())
            })
            .await?;
        }
        if meta.head.claim.is_some() {
            tracing::warn!(
                head = meta.head.seq,
                "clearing a batch a previous writer left unfinished in etcd"
            );
            self.clear_claim(meta.head).await?;
        }
        self.meta().await
    }

    /// Removes a cut-short batch: the records above `head.seq`, and the claim.
    async fn clear_claim(&self, head: Head) -> Result<(), StoreError> {
        let fence = self.fence()?;
        let k = self.keys.clone();
        self.run(move |mut c| async move {
            let events_end = layout::prefix_end(format!("{}events/", k.prefix()).as_bytes());
            let txn = Txn::new()
                .when([Compare::value(k.head(), CompareOp::Equal, head.encode()), fence])
                .and_then([
                    TxnOp::delete(k.event(head.seq + 1), Some(DeleteOptions::new().with_range(events_end))),
                    TxnOp::put(
                        k.head(),
                        Head {
                            seq: head.seq,
                            claim: None,
                        }
                        .encode(),
                        None,
                    ),
                ]);
            c.txn(txn).await.map_err(etcd_error)?;
            Ok(())
        })
        .await
    }

    /// Commits `records` (`(seq, framed record)`, seqs `after + 1 ..` in order) as the log's
    /// next records: all of them or none, guarded on the head being `after` and on this
    /// server's fence. When the answer to an earlier attempt was lost (the head already
    /// includes some of these records, byte for byte), only the rest is written.
    ///
    /// Errors: [`StoreError::HeadMoved`] when another writer moved the head,
    /// [`StoreError::Fenced`] when this server lost the writer lease, [`StoreError::Etcd`]
    /// when etcd does not answer (the batch may or may not have been committed: the next
    /// commit finds out).
    pub async fn commit(&self, after: u64, records: Vec<Record>) -> Result<(), StoreError> {
        let Some(last) = records.last().map(|r| r.0) else {
            return Ok(());
        };
        let _one = self.commit_lock.clone().lock_owned().await;
        let mut after = after;
        let mut records = records;
        for _ in 0..3 {
            match self.commit_once(after, &records).await? {
                None => {
                    self.note_alive();
                    return Ok(());
                }
                Some(head) if head.claim.is_none() && head.seq > after && head.seq <= last => {
                    // Ours already, if the record at the head is the one we meant to write.
                    let i = (head.seq - after - 1) as usize;
                    if self.record(head.seq).await?.as_deref() != Some(records[i].1.as_slice()) {
                        return Err(StoreError::HeadMoved {
                            expected: after,
                            found: head.seq,
                        });
                    }
                    records.drain(..=i);
                    if records.is_empty() {
                        self.note_alive();
                        return Ok(());
                    }
                    after = head.seq;
                }
                Some(head) if head.claim.is_some() && head.seq == after => self.clear_claim(head).await?,
                Some(head) => {
                    return Err(StoreError::HeadMoved {
                        expected: after,
                        found: head.seq,
                    })
                }
            }
        }
        Err(StoreError::Etcd(format!(
            "the head kept moving while committing resourceVersions {}..={last}",
            after + 1
        )))
    }

    /// One attempt: `None` when committed, else the head that failed the guard (after checking
    /// the fence: a fence failure is [`StoreError::Fenced`]).
    async fn commit_once(&self, after: u64, records: &[Record]) -> Result<Option<Head>, StoreError> {
        let last = records.last().map(|r| r.0).unwrap_or(after);
        let fence = self.fence()?;
        let k = self.keys.clone();
        let puts: Vec<layout::Put> = records
            .iter()
            .flat_map(|(seq, rec)| layout::record_puts(&k, *seq, rec))
            .collect();
        let mut txns = layout::transactions(puts);
        let expected = Head {
            seq: after,
            claim: None,
        }
        .encode();
        let committed = Head { seq: last, claim: None }.encode();
        let head_key = k.head();
        let ok = if txns.len() == 1 {
            let mut ops: Vec<TxnOp> = txns
                .remove(0)
                .into_iter()
                .map(|(k, v)| TxnOp::put(k, v, None))
                .collect();
            ops.push(TxnOp::put(head_key.clone(), committed, None));
            let txn = Txn::new()
                .when([Compare::value(head_key.clone(), CompareOp::Equal, expected), fence])
                .and_then(ops);
            self.txn(txn).await?
        } else {
            let claim = Head {
                seq: after,
                claim: Some(*uuid::Uuid::now_v7().as_bytes()),
            }
            .encode();
            let events_end = layout::prefix_end(format!("{}events/", k.prefix()).as_bytes());
            let start = Txn::new()
                .when([
                    Compare::value(head_key.clone(), CompareOp::Equal, expected),
                    fence.clone(),
                ])
                .and_then([
                    TxnOp::delete(k.event(after + 1), Some(DeleteOptions::new().with_range(events_end))),
                    TxnOp::put(head_key.clone(), claim.clone(), None),
                ]);
            let mut ok = self.txn(start).await?;
            for (i, chunk) in txns.into_iter().enumerate() {
                if !ok {
                    break;
                }
                if i == 1 {
                    fail::fail_point!("store::etcd::between_transactions", |_| Err(StoreError::Etcd(
                        "failpoint store::etcd::between_transactions".to_string()
                    )));
                }
                let txn = Txn::new()
                    .when([
                        Compare::value(head_key.clone(), CompareOp::Equal, claim.clone()),
                        fence.clone(),
                    ])
                    .and_then(
                        chunk
                            .into_iter()
                            .map(|(k, v)| TxnOp::put(k, v, None))
                            .collect::<Vec<_>>(),
                    );
                ok = self.txn(txn).await?;
            }
            if ok {
                let finish = Txn::new()
                    .when([Compare::value(head_key.clone(), CompareOp::Equal, claim), fence])
                    .and_then([TxnOp::put(head_key.clone(), committed, None)]);
                ok = self.txn(finish).await?;
            }
            ok
        };
        if ok {
            return Ok(None);
        }
        self.check_fence().await?;
        Ok(Some(self.meta().await?.head))
    }

    /// Runs one transaction; whether its compares held.
    async fn txn(&self, txn: Txn) -> Result<bool, StoreError> {
        self.run(move |mut c| async move { Ok(c.txn(txn).await.map_err(etcd_error)?.succeeded()) })
            .await
    }

    /// The record `seq` as stored (joined from its parts), if present.
    pub async fn record(&self, seq: u64) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.records(seq - 1, seq).await?.into_iter().next().map(|r| r.1))
    }

    /// The records with `after < seq <= through`, in order, joined from their parts. Errors:
    /// [`StoreError::Corrupt`] (tree `etcd`) naming a record whose parts do not join.
    pub async fn records(&self, after: u64, through: u64) -> Result<Vec<Record>, StoreError> {
        let mut out = Vec::new();
        self.read_records(after, through, |page| {
            out.extend(page);
            Ok(())
        })
        .await?;
        Ok(out)
    }

    /// Reads the records with `after < seq <= through` a page at a time (at most 256 keys per
    /// request), handing each page of joined records to `each`.
    pub async fn read_records(
        &self,
        after: u64,
        through: u64,
        mut each: impl FnMut(Vec<Record>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        const PAGE: i64 = 256;
        let k = self.keys.clone();
        let end = k.event(through.saturating_add(1));
        let mut from = k.event(after + 1);
        let mut carry: Vec<layout::Put> = Vec::new();
        loop {
            if through <= after {
                break;
            }
            let (start, stop) = (from.clone(), end.clone());
            let kvs = self
                .run(move |mut c| async move {
                    let resp = c
                        .get(start, Some(GetOptions::new().with_range(stop).with_limit(PAGE)))
                        .await
                        .map_err(etcd_error)?;
                    Ok(resp
                        .kvs()
                        .iter()
                        .map(|kv| (kv.key().to_vec(), kv.value().to_vec()))
                        .collect::<Vec<_>>())
                })
                .await?;
            let full = kvs.len() as i64 == PAGE;
            if let Some((last, _)) = kvs.last() {
                from = last.clone();
                from.push(0);
            }
            carry.extend(kvs);
            // A split record may continue on the next page: join up to its key only.
            let cut = if full {
                carry
                    .iter()
                    .rposition(|(key, _)| k.parse_event(key).is_some_and(|(_, part)| part.is_none()))
                    .unwrap_or(0)
            } else {
                carry.len()
            };
            let rest = carry.split_off(cut);
            let joined = layout::join_records(&k, std::mem::replace(&mut carry, rest)).map_err(|(seq, what)| {
                StoreError::Corrupt {
                    seq,
                    tree: "etcd",
                    what,
                }
            })?;
            each(joined)?;
            if !full {
                break;
            }
        }
        Ok(())
    }

    /// The start of an import into an empty prefix of a compacted log: the snapshot at the
    /// cut (`before - 1`) as the base, then the cut and the head at it, guarded on the head
    /// being 0 and on the fence.
    pub async fn import_base(&self, before: u64, snapshot: Vec<u8>) -> Result<(), StoreError> {
        let fence = self.fence()?;
        let k = self.keys.clone();
        let cut = before - 1;
        let ok = self
            .run(move |mut c| async move {
                for chunk in layout::transactions(layout::base_puts(&k, cut, &snapshot)) {
                    let txn = Txn::new().when([fence.clone()]).and_then(
                        chunk
                            .into_iter()
                            .map(|(k, v)| TxnOp::put(k, v, None))
                            .collect::<Vec<_>>(),
                    );
                    c.txn(txn).await.map_err(etcd_error)?;
                }
                let empty = Head { seq: 0, claim: None }.encode();
                let txn = Txn::new()
                    .when([Compare::value(k.head(), CompareOp::Equal, empty), fence])
                    .and_then([
                        TxnOp::put(k.compacted_before(), before.to_be_bytes().to_vec(), None),
                        TxnOp::put(k.head(), Head { seq: cut, claim: None }.encode(), None),
                    ]);
                Ok(c.txn(txn).await.map_err(etcd_error)?.succeeded())
            })
            .await?;
        if !ok {
            return Err(StoreError::Export(
                "the etcd prefix is not empty: import into a new one".into(),
            ));
        }
        Ok(())
    }

    /// The snapshot at the cut of the last compaction (`seq` = cut), joined from its parts.
    pub async fn base(&self, seq: u64) -> Result<Option<Vec<u8>>, StoreError> {
        let start = self.keys.base_of(seq);
        self.run(move |mut c| async move {
            let resp = c
                .get(start.clone(), Some(GetOptions::new().with_prefix()))
                .await
                .map_err(etcd_error)?;
            if resp.kvs().is_empty() {
                return Ok(None);
            }
            Ok(Some(resp.kvs().iter().flat_map(|kv| kv.value().to_vec()).collect()))
        })
        .await
    }

    /// Compaction in etcd (from a synchronous caller): writes `snapshot` (the framed state at
    /// `before - 1`) as the new base, then in one transaction records the cut and deletes the
    /// events and older bases before it. Guarded by the fence.
    pub fn compact_blocking(&self, before: u64, snapshot: Vec<u8>) -> Result<(), StoreError> {
        let fence = self.fence()?;
        let k = self.keys.clone();
        let cut = before - 1;
        self.run_blocking(move |mut c| async move {
            for chunk in layout::transactions(layout::base_puts(&k, cut, &snapshot)) {
                let txn = Txn::new().when([fence.clone()]).and_then(
                    chunk
                        .into_iter()
                        .map(|(k, v)| TxnOp::put(k, v, None))
                        .collect::<Vec<_>>(),
                );
                if !c.txn(txn).await.map_err(etcd_error)?.succeeded() {
                    return Err(StoreError::Fenced {
                        holder: "another server".to_string(),
                    });
                }
            }
            let events_start = format!("{}events/", k.prefix()).into_bytes();
            let txn = Txn::new().when([fence]).and_then([
                TxnOp::put(k.compacted_before(), before.to_be_bytes().to_vec(), None),
                TxnOp::delete(events_start, Some(DeleteOptions::new().with_range(k.event(before)))),
                TxnOp::delete(k.base_prefix(), Some(DeleteOptions::new().with_range(k.base_of(cut)))),
            ]);
            if !c.txn(txn).await.map_err(etcd_error)?.succeeded() {
                return Err(StoreError::Fenced {
                    holder: "another server".to_string(),
                });
            }
            Ok(())
        })
    }
}

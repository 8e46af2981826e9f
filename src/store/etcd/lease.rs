//! The writer's lease: one mco server writes under a prefix at a time. Taking the writer key
//! (created on a lease only when absent), keeping the lease alive, noticing it lost, the
//! compare every write carries (the fence), and giving it up on a clean stop.

use super::{etcd_error, key_str, EtcdLog, Fence};
use crate::store::StoreError;
use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};
use std::sync::atomic::Ordering;
use std::time::Duration;

impl EtcdLog {
    /// Becomes the writer of the prefix when nobody holds it: grants a lease of
    /// [`EtcdConfig::lease_ttl_secs`], creates the writer key on it (only if absent) and keeps
    /// the lease alive from then on. `Ok(None)` when it was taken; `Ok(Some(holder))` names the
    /// server that holds it.
    pub async fn try_acquire(&self) -> Result<Option<String>, StoreError> {
        if self.fence.get().is_some() {
            return Ok(None);
        }
        let (key, name, ttl) = (
            self.keys.writer(),
            self.config.name.clone(),
            self.config.lease_ttl_secs.max(2),
        );
        let outcome = self
            .run(move |mut c| async move {
                let lease = c.lease_grant(ttl, None).await.map_err(etcd_error)?.id();
                let txn = Txn::new()
                    .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                    .and_then([TxnOp::put(key.clone(), name, Some(PutOptions::new().with_lease(lease)))])
                    .or_else([TxnOp::get(key.clone(), None)]);
                let resp = c.txn(txn).await.map_err(etcd_error)?;
                if resp.succeeded() {
                    let created = resp.header().map(|h| h.revision()).unwrap_or(0);
                    return Ok(Ok(Fence { lease, created }));
                }
                let _ = c.lease_revoke(lease).await;
                let holder = resp
                    .op_responses()
                    .into_iter()
                    .find_map(|r| match r {
                        etcd_client::TxnOpResponse::Get(g) => g.kvs().first().map(|kv| key_str(kv.value())),
                        _ => None,
                    })
                    .unwrap_or_default();
                Ok(Err(holder))
            })
            .await?;
        match outcome {
            Ok(fence) => {
                let _ = self.fence.set(fence);
                self.keep_alive(fence.lease);
                Ok(None)
            }
            Err(holder) => Ok(Some(holder)),
        }
    }

    /// Renews the lease every third of its time to live; when no renewal has succeeded for a
    /// whole time to live (or etcd says it expired), marks the hold lost.
    fn keep_alive(&self, lease: i64) {
        let (client, ttl, lost, tx) = (
            self.client.clone(),
            Duration::from_secs(self.config.lease_ttl_secs.max(2) as u64),
            self.lost.clone(),
            self.lost_tx.clone(),
        );
        let (renewed_ms, started) = (self.renewed_ms.clone(), self.started);
        renewed_ms.store(started.elapsed().as_millis() as u64, Ordering::SeqCst);
        self.handle.spawn(async move {
            let mut client = client;
            let mut renewed = tokio::time::Instant::now();
            let mut stream = None;
            loop {
                if renewed.elapsed() >= ttl {
                    break;
                }
                if stream.is_none() {
                    stream = client.lease_keep_alive(lease).await.ok();
                }
                if let Some((keeper, answers)) = stream.as_mut() {
                    let renewal = async {
                        keeper.keep_alive().await?;
                        answers.message().await
                    };
                    match tokio::time::timeout(ttl / 3, renewal).await {
                        Ok(Ok(Some(answer))) if answer.ttl() > 0 => {
                            renewed = tokio::time::Instant::now();
                            renewed_ms.store(started.elapsed().as_millis() as u64, Ordering::SeqCst);
                        }
                        Ok(Ok(Some(_))) => break, // etcd says the lease has expired
                        _ => stream = None,
                    }
                }
                tokio::time::sleep(ttl / 3).await;
            }
            lost.store(true, Ordering::SeqCst);
            tx.send_replace(true);
            tracing::error!("lost the etcd lease of the event log: another server may write it now");
        });
    }

    /// Why this server should not be ready, `None` while it holds the lease and etcd answers
    /// its renewals (the last one, or the last fenced commit, less than half a time to live
    /// ago; renewals go every third): `/readyz` fails with it.
    pub fn unready(&self) -> Option<String> {
        if self.lost() {
            return Some("lost the etcd writer lease of the event log".to_string());
        }
        self.fence.get()?;
        let ttl_ms = self.config.lease_ttl_secs.max(2) as u64 * 1000;
        let quiet = self.since_renewal_ms();
        (quiet > ttl_ms / 2 + 500).then(|| format!("etcd has not renewed the writer lease for {} ms", quiet))
    }

    /// Records that the lease is alive now: a transaction that compared the writer key
    /// succeeded (the key exists only while its lease does), as good as a renewal.
    pub(super) fn note_alive(&self) {
        self.renewed_ms
            .store(self.started.elapsed().as_millis() as u64, Ordering::SeqCst);
    }

    /// Milliseconds since the lease was last renewed (or taken).
    fn since_renewal_ms(&self) -> u64 {
        let now = self.started.elapsed().as_millis() as u64;
        now.saturating_sub(self.renewed_ms.load(Ordering::SeqCst))
    }

    /// Whether this server lost its hold on the prefix (it may not write any more).
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Changes to true when the hold is lost.
    pub fn lost_changes(&self) -> tokio::sync::watch::Receiver<bool> {
        self.lost_tx.subscribe()
    }

    /// The compare every write carries: the writer key is still the one this server created.
    pub(super) fn fence(&self) -> Result<Compare, StoreError> {
        let f = self.fence.get().ok_or(StoreError::Fenced {
            holder: "nobody (this server never held the writer lease)".to_string(),
        })?;
        if self.lost() {
            return Err(StoreError::Fenced {
                holder: "unknown (the lease expired)".to_string(),
            });
        }
        Ok(Compare::create_revision(
            self.keys.writer(),
            CompareOp::Equal,
            f.created,
        ))
    }

    /// [`StoreError::Fenced`] naming the holder when the writer key is no longer this server's.
    pub(super) async fn check_fence(&self) -> Result<(), StoreError> {
        let created = self.fence.get().map(|f| f.created).unwrap_or(-1);
        let key = self.keys.writer();
        let holder = self
            .run(move |mut c| async move {
                let resp = c.get(key, None).await.map_err(etcd_error)?;
                Ok(resp
                    .kvs()
                    .first()
                    .filter(|kv| kv.create_revision() != created)
                    .map(|kv| key_str(kv.value()))
                    .or(resp.kvs().is_empty().then(|| "nobody (the lease expired)".to_string())))
            })
            .await?;
        match holder {
            Some(holder) => {
                self.lost.store(true, Ordering::SeqCst);
                self.lost_tx.send_replace(true);
                Err(StoreError::Fenced { holder })
            }
            None => Ok(()),
        }
    }

    /// Gives up the writer lease at once (a clean stop), so a standby takes over without
    /// waiting for it to expire.
    pub async fn release(&self) {
        if let Some(f) = self.fence.get().copied() {
            let _ = self
                .run(move |mut c| async move {
                    c.lease_revoke(f.lease).await.map_err(etcd_error)?;
                    Ok(())
                })
                .await;
        }
    }
}

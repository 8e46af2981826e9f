//! `--sort-by` of `mco get`: kubectl's sorting printer (k8s.io/kubectl pkg/cmd/get/sorter.go).
//!
//! Owns the order: the field is a kubectl JSONPath (`RelaxedJSONPathExpression`: `.a.b`, `a.b`
//! or `{.a.b}`), read from each object; numbers compare as numbers, strings in natural order
//! (`sortorder.NaturalLess`: digit runs by value, so `worker-2` before `worker-10`), and the
//! sort is stable. A path no object has is kubectl's error; objects that lack it sort first.

use serde_json::Value;
use std::cmp::Ordering;

/// The `{...}` expression kubectl's `RelaxedJSONPathExpression` makes of `expr`, its inner
/// path (`.metadata.name`).
fn relaxed(expr: &str) -> Result<String, String> {
    let inner = expr.trim();
    let inner = inner
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or(inner);
    if inner.is_empty() {
        return Err(format!("unexpected path string, expected a 'name1.name2' or '.name1.name2' or '{{name1.name2}}' or '{{.name1.name2}}': {expr}"));
    }
    Ok(match inner.starts_with('.') {
        true => inner.to_string(),
        false => format!(".{inner}"),
    })
}

/// Sorts `items` by the field `expr` names, as kubectl's `--sort-by`.
pub fn sort_by(items: &mut [Value], expr: &str) -> anyhow::Result<()> {
    let path = relaxed(expr).map_err(|e| anyhow::anyhow!(e))?;
    let query = super::jsonpath::to_query(&path).map_err(|e| anyhow::anyhow!(e))?;
    let keys: Vec<Option<Value>> = items
        .iter()
        .map(|o| query.query(o).all().first().map(|v| (*v).clone()))
        .collect();
    if !items.is_empty() && keys.iter().all(Option::is_none) {
        anyhow::bail!("couldn't find any field with path \"{{{path}}}\" in the list of objects");
    }
    if let Some(v) = keys.iter().flatten().find(|v| v.is_object() || v.is_array()) {
        // kubectl's sorter compares scalars only (`isLess`: an unsortable type otherwise).
        let what = if v.is_object() {
            "map[string]interface {}"
        } else {
            "[]interface {}"
        };
        anyhow::bail!("Field {{{path}}} is an unsortable type: {what}");
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| compare(keys[a].as_ref(), keys[b].as_ref()));
    let sorted: Vec<Value> = order.iter().map(|&i| items[i].clone()).collect();
    items.clone_from_slice(&sorted);
    Ok(())
}

fn compare(a: Option<&Value>, b: Option<&Value>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(Value::Number(x)), Some(Value::Number(y))) => x
            .as_f64()
            .unwrap_or(0.0)
            .partial_cmp(&y.as_f64().unwrap_or(0.0))
            .unwrap_or(Ordering::Equal),
        (Some(Value::String(x)), Some(Value::String(y))) => natural(x, y),
        (Some(Value::Bool(x)), Some(Value::Bool(y))) => x.cmp(y),
        (Some(x), Some(y)) => natural(&x.to_string(), &y.to_string()),
    }
}

/// `sortorder.NaturalLess` (github.com/fvbommel/sortorder): runs of digits compare by value
/// (then by length: fewer leading zeros first), everything else byte by byte.
fn natural(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].is_ascii_digit() && b[j].is_ascii_digit() {
            let (si, sj) = (i, j);
            while i < a.len() && a[i].is_ascii_digit() {
                i += 1;
            }
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let (x, y) = (&a[si..i], &b[sj..j]);
            let trim = |d: &[u8]| d.iter().position(|c| *c != b'0').map_or(0, |p| d.len() - p);
            let (lx, ly) = (trim(x), trim(y));
            let by_value = lx.cmp(&ly).then_with(|| x[x.len() - lx..].cmp(&y[y.len() - ly..]));
            match by_value.then_with(|| x.len().cmp(&y.len())) {
                Ordering::Equal => continue,
                o => return o,
            }
        }
        match a[i].cmp(&b[j]) {
            Ordering::Equal => {
                i += 1;
                j += 1;
            }
            o => return o,
        }
    }
    (a.len() - i).cmp(&(b.len() - j))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn natural_order_and_missing_fields_first() {
        let mut items = vec![
            json!({"n": "worker-10", "c": 3}),
            json!({"n": "worker-2", "c": 1}),
            json!({"c": 2}),
        ];
        sort_by(&mut items, "{.n}").unwrap();
        assert_eq!(items[0], json!({"c": 2}));
        assert_eq!(items[1]["n"], "worker-2");
        sort_by(&mut items, ".c").unwrap();
        assert_eq!(
            items.iter().map(|i| i["c"].as_i64().unwrap()).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert!(sort_by(&mut items, "x.y")
            .unwrap_err()
            .to_string()
            .contains("couldn't find any field"));
    }
}

//! OpenAPI v3 documents, good enough for kubectl: PATCH operations carry `x-kubernetes-group-version-kind`
//! and a `fieldValidation` parameter (so kubectl leaves validation to the server), built-in kinds
//! advertise strategic merge patch with merge keys for the lists that need them, and CRD kinds carry
//! their schemas.

use serde_json::{Map, Value, json};

use crate::registry::{Registry, ResourceDef};

/// Merge metadata for built-in kinds comes from kudo-patch's table, the same one its strategic merge
/// patch and server-side apply use, so what the schema advertises is what the server does.
fn builtin_schema(d: &ResourceDef) -> Value {
    let gvk = kudo_patch::Gvk::new(d.group.as_str(), d.version.as_str(), d.kind.as_str());
    let mut root = json!({"type": "object", "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
    }});
    let mut fields: Vec<(Vec<&'static str>, kudo_patch::ListStrategy)> =
        kudo_patch::schema::list_fields(&gvk).collect();
    fields.sort_by_key(|(p, _)| p.len());
    for (path, strategy) in fields {
        let mut node = &mut root;
        for (i, seg) in path.iter().enumerate() {
            while node.get("type").and_then(|t| t.as_str()) == Some("array") {
                node = &mut node["items"];
            }
            if !node.get("properties").is_some_and(|p| p.is_object()) {
                node["type"] = json!("object");
                node["properties"] = json!({});
            }
            let child = node["properties"].as_object_mut().map(|p| {
                p.entry(seg.to_string())
                    .or_insert_with(|| json!({"type": "object"}))
            });
            let Some(child) = child else { break };
            if i + 1 == path.len() {
                let items = child
                    .get("properties")
                    .map(|p| json!({"type": "object", "properties": p}));
                let mut list = json!({"type": "array", "items": items.unwrap_or(json!({"type": "object"}))});
                if let Some(ps) = strategy.patch_strategy {
                    list["x-kubernetes-patch-strategy"] = json!(ps);
                }
                if let Some(k) = strategy.merge_key {
                    list["x-kubernetes-patch-merge-key"] = json!(k);
                }
                match strategy.list_type {
                    kudo_patch::ListType::Atomic => list["x-kubernetes-list-type"] = json!("atomic"),
                    kudo_patch::ListType::Set => {
                        list["x-kubernetes-list-type"] = json!("set");
                        list["items"] = json!({"type": "string"});
                    }
                    kudo_patch::ListType::Map(keys) => {
                        list["x-kubernetes-list-type"] = json!("map");
                        list["x-kubernetes-list-map-keys"] = json!(keys);
                    }
                }
                *child = list;
            }
            node = child;
        }
    }
    root
}

fn object_meta() -> Value {
    builtin_schema(&ResourceDef {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        plural: "configmaps".into(),
        singular: "configmap".into(),
        namespaced: true,
        short_names: Vec::new(),
        categories: Vec::new(),
        status: false,
        scale: None,
        generation: false,
        custom: None,
        storage_version: true,
    })["properties"]["metadata"]
        .clone()
}

fn def_name(d: &ResourceDef) -> String {
    if d.custom.is_some() {
        let rev: Vec<&str> = d.group.split('.').rev().collect();
        format!("{}.{}.{}", rev.join("."), d.version, d.kind)
    } else {
        let g = if d.group.is_empty() {
            "core".to_string()
        } else {
            d.group.trim_end_matches(".k8s.io").to_string()
        };
        format!("io.k8s.api.{g}.{}.{}", d.version, d.kind)
    }
}

fn gvk(d: &ResourceDef) -> Value {
    json!({"group": d.group, "version": d.version, "kind": d.kind})
}

fn query(name: &str, ty: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": ty, "uniqueItems": true}})
}

fn op(action: &str, d: &ResourceDef, schema_ref: &str, params: Vec<Value>, body: Option<Value>) -> Value {
    let mut o = json!({
        "operationId": format!("{action}{}", d.kind),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(d),
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": schema_ref}}}}},
    });
    if let Some(b) = body {
        o["requestBody"] = b;
    }
    o
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/G/V`; `None` if not served.
pub fn gv_document(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs: Vec<_> = reg
        .all()
        .into_iter()
        .filter(|d| d.group == group && d.version == version)
        .collect();
    if defs.is_empty() {
        return None;
    }
    let prefix = if group.is_empty() {
        "/api/v1".to_string()
    } else {
        format!("/apis/{group}/{version}")
    };
    let mut paths = Map::new();
    let mut schemas = Map::new();
    schemas.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch".into(),
        json!({"type": "object"}),
    );
    schemas.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".into(),
        object_meta(),
    );
    for d in &defs {
        let name = def_name(d);
        let mut schema = match &d.custom {
            Some(c) => {
                let mut s = c
                    .schema
                    .clone()
                    .unwrap_or(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
                if let Some(p) = s.get_mut("properties").and_then(|p| p.as_object_mut()) {
                    p.insert("metadata".into(), json!({"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}));
                }
                s
            }
            None => builtin_schema(d),
        };
        schema["x-kubernetes-group-version-kind"] = json!([gvk(d)]);
        schemas.insert(name.clone(), schema);
        let schema_ref = format!("#/components/schemas/{name}");
        // Strategic merge patch is accepted for built-in kinds but deliberately not advertised here:
        // kubectl would then compute client-side-apply patches from these (partial) schemas; without
        // it, kubectl uses its compiled-in type metadata for built-ins (exactly what it does against a
        // real server) and JSON merge patch for custom resources.
        let patch_types = [
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ];
        let mut content = Map::new();
        for t in patch_types {
            content.insert(t.into(), json!({"schema": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}}));
        }
        let patch_body = json!({"content": content, "required": true});
        let obj_body = json!({"content": {"*/*": {"schema": {"$ref": schema_ref}}}, "required": true});
        let write_params = || {
            vec![
                query("dryRun", "string"),
                query("fieldManager", "string"),
                query("fieldValidation", "string"),
                query("pretty", "string"),
            ]
        };
        let mut patch_params = write_params();
        patch_params.push(query("force", "boolean"));
        let base = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", d.plural)
        } else {
            format!("{prefix}/{}", d.plural)
        };
        let mut path_params =
            vec![json!({"name": "name", "in": "path", "required": true, "schema": {"type": "string"}})];
        if d.namespaced {
            path_params.push(
                json!({"name": "namespace", "in": "path", "required": true, "schema": {"type": "string"}}),
            );
        }
        paths.insert(
            format!("{base}/{{name}}"),
            json!({
                "get": op("get", d, &schema_ref, vec![query("pretty", "string")], None),
                "put": op("put", d, &schema_ref, write_params(), Some(obj_body.clone())),
                "patch": op("patch", d, &schema_ref, patch_params.clone(), Some(patch_body.clone())),
                "delete": op("delete", d, &schema_ref, vec![query("dryRun", "string"), query("propagationPolicy", "string")], None),
                "parameters": path_params.clone(),
            }),
        );
        let mut list_item = json!({
            "get": op("list", d, &schema_ref, vec![query("labelSelector", "string"), query("fieldSelector", "string"), query("limit", "integer"), query("continue", "string"), query("watch", "boolean")], None),
            "post": op("post", d, &schema_ref, write_params(), Some(obj_body.clone())),
            "delete": op("deletecollection", d, &schema_ref, vec![query("labelSelector", "string")], None),
        });
        if d.namespaced {
            list_item["parameters"] = json!([path_params[1].clone()]);
        }
        paths.insert(base.clone(), list_item);
        for (sub, enabled) in [("status", d.status), ("scale", d.scale.is_some())] {
            if enabled {
                paths.insert(
                    format!("{base}/{{name}}/{sub}"),
                    json!({
                        "get": op("get", d, &schema_ref, vec![], None),
                        "put": op("put", d, &schema_ref, write_params(), Some(obj_body.clone())),
                        "patch": op("patch", d, &schema_ref, patch_params.clone(), Some(patch_body.clone())),
                        "parameters": path_params.clone(),
                    }),
                );
            }
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::GIT_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// `/openapi/v3`: the index of per-group-version documents, with a content hash kubectl caches by.
pub fn index(reg: &Registry) -> Value {
    let mut paths = Map::new();
    let mut gvs: Vec<(String, String)> = vec![(String::new(), "v1".into())];
    for (g, vs) in reg.groups() {
        for v in vs {
            gvs.push((g.clone(), v));
        }
    }
    for (g, v) in gvs {
        let Some(doc) = gv_document(reg, &g, &v) else {
            continue;
        };
        let key = if g.is_empty() {
            "api/v1".to_string()
        } else {
            format!("apis/{g}/{v}")
        };
        let hash = fnv(doc.to_string().as_bytes());
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash:016X}")}),
        );
    }
    json!({"paths": paths})
}

fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

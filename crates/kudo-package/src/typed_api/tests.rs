use super::*;
use kudo_api::{ObjectMeta, ObjectReference, OperatorVersionSpec};

fn param(name: &str, ty: &str, default: Option<&str>) -> Parameter {
    Parameter {
        name: name.into(),
        value_type: ty.into(),
        default: default.map(str::to_string),
        required: Some(true),
        description: format!("the {name}"),
        ..Default::default()
    }
}

fn ov(api: Option<TypedApi>, parameters: Vec<Parameter>) -> OperatorVersion {
    OperatorVersion {
        api_version: kudo_api::API_VERSION.into(),
        kind: "OperatorVersion".into(),
        metadata: ObjectMeta {
            name: "galera-0.3.0".into(),
            ..Default::default()
        },
        spec: OperatorVersionSpec {
            operator: ObjectReference {
                name: "galera".into(),
                ..Default::default()
            },
            parameters,
            api,
            ..Default::default()
        },
        status: None,
    }
}

fn galera_api() -> TypedApi {
    TypedApi {
        group: "galera.kudo.dev".into(),
        kind: "Galera".into(),
        short_names: vec!["gal".into()],
        ..Default::default()
    }
}

fn galera() -> OperatorVersion {
    let mut count = param("NODE_COUNT", "integer", Some("3"));
    count.r#enum = None;
    let mut immutable = param("CLUSTER_NAME", "string", Some("galera"));
    immutable.immutable = Some(true);
    let mut password = param("ADMIN_PASSWORD", "string", None);
    password.sensitive = Some(true);
    let mut mode = param("MODE", "string", Some("fast"));
    mode.r#enum = Some(vec!["fast".into(), "safe".into()]);
    ov(
        Some(galera_api()),
        vec![
            count,
            immutable,
            password,
            mode,
            param("NEEDED", "string", None),
            param("TUNING", "map", Some("a: 1\n")),
            param("DEBUG", "boolean", Some("false")),
        ],
    )
}

#[test]
fn no_api_no_crd() {
    assert_eq!(crd(&ov(None, vec![param("A", "string", None)])), None);
}

#[test]
fn the_crd_is_named_and_labelled_for_its_operator() {
    let c = crd(&galera()).unwrap();
    assert_eq!(c["metadata"]["name"], "galeras.galera.kudo.dev");
    assert_eq!(c["metadata"]["labels"][OPERATOR_LABEL], "galera");
    assert_eq!(
        c["metadata"]["annotations"][OPERATOR_VERSION_ANNOTATION],
        "galera-0.3.0"
    );
    assert_eq!(c["spec"]["group"], "galera.kudo.dev");
    assert_eq!(
        c["spec"]["names"],
        json!({"kind": "Galera", "listKind": "GaleraList", "plural": "galeras", "singular": "galera", "shortNames": ["gal"]})
    );
    let v = &c["spec"]["versions"][0];
    assert_eq!(v["name"], "v1");
    assert_eq!(v["subresources"], json!({"status": {}}));
    let cols: Vec<&str> = v["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, ["Plan", "Status", "Ready", "Age"]);
}

#[test]
fn every_parameter_but_the_sensitive_is_a_typed_field() {
    let c = crd(&galera()).unwrap();
    let spec = &c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let props = spec["properties"].as_object().unwrap();
    let names: Vec<&String> = props.keys().collect();
    assert_eq!(
        names,
        [
            "NODE_COUNT",
            "CLUSTER_NAME",
            "MODE",
            "NEEDED",
            "TUNING",
            "DEBUG",
            "parameterSources"
        ]
    );
    assert_eq!(
        props["NODE_COUNT"],
        json!({"type": "integer", "description": "the NODE_COUNT", "default": 3})
    );
    assert_eq!(
        props["CLUSTER_NAME"]["x-kubernetes-validations"],
        json!([{"rule": "self == oldSelf", "message": "Value is immutable"}])
    );
    assert_eq!(props["MODE"]["enum"], json!(["fast", "safe"]));
    assert_eq!(props["TUNING"]["default"], json!({"a": 1}));
    assert_eq!(props["DEBUG"]["default"], json!(false));
    assert_eq!(
        spec["required"],
        json!(["NEEDED"]),
        "required without default only"
    );
}

#[test]
fn plural_and_version_default_and_can_be_given() {
    let mut api = galera_api();
    assert_eq!(
        (api.plural(), api.version().to_string()),
        ("galeras".into(), "v1".into())
    );
    api.plural = "galerae".into();
    api.version = "v1alpha1".into();
    assert_eq!(api.crd_name(), "galerae.galera.kudo.dev");
    assert_eq!(api.api_version(), "galera.kudo.dev/v1alpha1");
}

#[test]
fn typed_spec_and_instance_strings_convert_both_ways() {
    let o = galera();
    let spec = json!({"NODE_COUNT": 5, "DEBUG": true, "TUNING": {"b": [1, 2]}, "ADMIN_PASSWORD": "x", "OTHER": 1,
        "parameterSources": {"ADMIN_PASSWORD": {"secretKeyRef": {"name": "s", "key": "k"}}}});
    let params = parameters_of(&o, &spec);
    assert_eq!(
        params,
        BTreeMap::from([
            ("DEBUG".to_string(), "true".to_string()),
            ("NODE_COUNT".to_string(), "5".to_string()),
            ("TUNING".to_string(), "b:\n- 1\n- 2\n".to_string()),
        ])
    );
    let back = spec_fields(&o, &params).unwrap();
    assert_eq!(back["NODE_COUNT"], json!(5));
    assert_eq!(back["DEBUG"], json!(true));
    assert_eq!(back["TUNING"], json!({"b": [1, 2]}));
    let err = spec_fields(
        &o,
        &BTreeMap::from([("ADMIN_PASSWORD".to_string(), "x".to_string())]),
    )
    .unwrap_err();
    assert_eq!(err, SpecFieldError::NotAField("ADMIN_PASSWORD".into()));
    let err = spec_fields(
        &o,
        &BTreeMap::from([("NODE_COUNT".to_string(), "many".to_string())]),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "parameter NODE_COUNT: \"many\" is not of type integer"
    );
}

#[test]
fn only_a_crd_labelled_for_this_operator_is_ours() {
    let labelled = |o: &str| json!({"metadata": {"labels": {OPERATOR_LABEL: o}}});
    assert_eq!(ownership(None, "galera"), Ownership::Absent);
    assert_eq!(ownership(Some(&labelled("galera")), "galera"), Ownership::Ours);
    assert_eq!(
        ownership(Some(&labelled("mysql")), "galera"),
        Ownership::Foreign("the KUDO operator mysql".into())
    );
    assert_eq!(
        ownership(Some(&json!({"metadata": {}})), "galera"),
        Ownership::Foreign("something other than kudo-rs".into())
    );
}

#[test]
fn api_sections_are_checked() {
    let cases: Vec<(TypedApi, &str)> = vec![
        (galera_api(), ""),
        (
            TypedApi {
                group: String::new(),
                ..galera_api()
            },
            "group \"\" must be a DNS subdomain",
        ),
        (
            TypedApi {
                group: "galera".into(),
                ..galera_api()
            },
            "at least one dot",
        ),
        (
            TypedApi {
                group: "kudo.dev".into(),
                ..galera_api()
            },
            "group kudo.dev is KUDO's own",
        ),
        (
            TypedApi {
                kind: "galera".into(),
                ..galera_api()
            },
            "kind \"galera\" must start with an upper-case",
        ),
        (
            TypedApi {
                kind: String::new(),
                ..galera_api()
            },
            "kind \"\"",
        ),
        (
            TypedApi {
                version: "1".into(),
                ..galera_api()
            },
            "version \"1\" must look like v1",
        ),
        (
            TypedApi {
                plural: "Galeras".into(),
                ..galera_api()
            },
            "name \"Galeras\" must be a lower-case DNS label",
        ),
        (
            TypedApi {
                short_names: vec!["g_l".into()],
                ..galera_api()
            },
            "name \"g_l\"",
        ),
    ];
    for (api, want) in cases {
        let errs = check_api(&api, &[]);
        if want.is_empty() {
            assert!(errs.is_empty(), "{api:?}: {errs:?}");
        } else {
            assert!(
                errs.iter().any(|e| e.contains(want)),
                "{api:?}: want {want:?} in {errs:?}"
            );
        }
    }
    let collide = check_api(&galera_api(), &[param("parameterSources", "string", None)]);
    assert!(collide[0].contains("collides"), "{collide:?}");
}

#[test]
fn bounds_shapes_and_package_rules_reach_the_crd() {
    let mut o = galera();
    o.spec.parameters[0].schema.maximum = Some(9.into());
    o.spec.parameters[0].schema.exclusive_minimum = Some(0.into());
    o.spec.parameters.push(param("ZONES", "array", None));
    o.spec.parameter_validations = vec![
        kudo_api::ValidationRule {
            rule: "self.NODE_COUNT % 2 == 1".into(),
            message: "NODE_COUNT must be odd".into(),
        },
        kudo_api::ValidationRule {
            rule: "size(self.ADMIN_PASSWORD) > 8".into(),
            message: String::new(),
        },
    ];
    let c = crd(&o).unwrap();
    let spec = &c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let count = &spec["properties"]["NODE_COUNT"];
    assert_eq!(count["maximum"], json!(9));
    assert_eq!(
        (&count["minimum"], &count["exclusiveMinimum"]),
        (&json!(0), &json!(true)),
        "kube's dialect"
    );
    assert_eq!(
        spec["properties"]["ZONES"]["items"],
        json!({"x-kubernetes-preserve-unknown-fields": true})
    );
    assert_eq!(
        spec["properties"]["TUNING"]["x-kubernetes-preserve-unknown-fields"],
        json!(true)
    );
    assert_eq!(
        spec["x-kubernetes-validations"],
        json!([{"rule": "self.NODE_COUNT % 2 == 1", "message": "NODE_COUNT must be odd"}]),
        "a rule over a sensitive parameter is not the CRD's: the field does not exist there"
    );
    let errs = kudo_schema::check_schema(spec);
    assert!(errs.is_empty(), "the spec schema is usable: {errs:?}");
}

#[test]
fn breaking_fields_name_what_the_new_schema_refuses() {
    let mut o = galera();
    o.spec.parameters[0].schema.maximum = Some(4.into());
    let c = crd(&o).unwrap();
    let spec = &c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let ok = json!({"NODE_COUNT": 3, "NEEDED": "x"});
    assert_eq!(breaking_fields(spec, &ok), Vec::<String>::new());
    let broken = json!({"NODE_COUNT": 5, "MODE": "slow", "NEEDED": "x", "GONE": 1});
    assert_eq!(
        breaking_fields(spec, &broken),
        [
            "spec.GONE is set, and the new version has no such parameter",
            "spec.NODE_COUNT: Invalid value: 5: spec.NODE_COUNT in body should be less than or equal to 4",
            "spec.MODE: Unsupported value: \"slow\": supported values: \"fast\", \"safe\"",
        ]
    );
}

/// Found on the real cluster: with `view` reading `<plural>/status` and `edit` not, a namespace
/// admin's `create rolebinding --clusterrole=view` was refused as an escalation.
#[test]
fn edit_and_admin_hold_everything_view_grants() {
    let roles = cluster_roles(&galera());
    let rules = |suffix: &str| -> Vec<(String, String)> {
        let role = roles
            .iter()
            .find(|r| r["metadata"]["name"].as_str().unwrap().ends_with(suffix))
            .unwrap();
        let mut out = Vec::new();
        for rule in role["rules"].as_array().unwrap() {
            for res in rule["resources"].as_array().unwrap() {
                for verb in rule["verbs"].as_array().unwrap() {
                    out.push((
                        res.as_str().unwrap().to_string(),
                        verb.as_str().unwrap().to_string(),
                    ));
                }
            }
        }
        out
    };
    let edit = rules(":edit");
    let view = rules(":view");
    assert!(!view.is_empty());
    for grant in &view {
        assert!(edit.contains(grant), "edit lacks {grant:?}");
    }
}

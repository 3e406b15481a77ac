// helm-render renders a Helm chart's templates the way `helm template` does, for tests on
// machines without the helm binary. It is not Helm: it uses the same template engine (Go's
// text/template), the same function library (Sprig v3) and YAML library (sigs.k8s.io/yaml) that
// Helm 3 uses, plus Helm's own template functions (include, tpl, required, toYaml, fromYaml,
// toJson, fromJson, lookup) written here after Helm's documented behaviour. It does not do
// subcharts, .Files, values templates or schema validation (the jest test validates values with
// values.schema.json separately).
//
//	helm-render -chart deploy/helm/roost [-f values.yaml]... [-name roost] [-namespace roost]
//
// prints {"manifests": {"roost/templates/x.yaml": "..."}, "notes": "..."} as JSON, or exits 1
// with the rendering error on stderr.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"sigs.k8s.io/yaml"
)

type valueFiles []string

func (v *valueFiles) String() string     { return strings.Join(*v, ",") }
func (v *valueFiles) Set(s string) error { *v = append(*v, s); return nil }

// ChartMeta mirrors the fields of Chart.yaml that templates read as .Chart.X.
type ChartMeta struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	AppVersion  string `json:"appVersion"`
	Description string `json:"description"`
	Type        string `json:"type"`
	KubeVersion string `json:"kubeVersion"`
	APIVersion  string `json:"apiVersion"`
}

type KubeVersion struct{ Version, Major, Minor, GitVersion string }

func (k KubeVersion) String() string { return k.Version }

type APIVersions []string

func (a APIVersions) Has(v string) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

type Capabilities struct {
	KubeVersion KubeVersion
	APIVersions APIVersions
}

// merge overlays src on dst as Helm does for user values: maps merge key by key, a null deletes.
func merge(dst, src map[string]interface{}) map[string]interface{} {
	for key, value := range src {
		if value == nil {
			delete(dst, key)
			continue
		}
		srcMap, srcIsMap := value.(map[string]interface{})
		dstMap, dstIsMap := dst[key].(map[string]interface{})
		if srcIsMap && dstIsMap {
			dst[key] = merge(dstMap, srcMap)
		} else {
			dst[key] = value
		}
	}
	return dst
}

func readYAMLMap(file string) (map[string]interface{}, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return out, nil
}

func main() {
	chartDir := flag.String("chart", "", "chart directory")
	name := flag.String("name", "roost", "release name")
	namespace := flag.String("namespace", "roost", "release namespace")
	var files valueFiles
	flag.Var(&files, "f", "values file (repeatable, later files win)")
	flag.Parse()
	if err := run(*chartDir, *name, *namespace, files); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(chartDir, releaseName, namespace string, files []string) error {
	metaBytes, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return err
	}
	var meta ChartMeta
	if err := yaml.Unmarshal(metaBytes, &meta); err != nil {
		return fmt.Errorf("Chart.yaml: %w", err)
	}
	values, err := readYAMLMap(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return err
	}
	for _, file := range files {
		overlay, err := readYAMLMap(file)
		if err != nil {
			return err
		}
		values = merge(values, overlay)
	}

	top := map[string]interface{}{
		"Values": values,
		"Chart":  &meta,
		"Release": map[string]interface{}{
			"Name": releaseName, "Namespace": namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Capabilities": &Capabilities{
			KubeVersion: KubeVersion{Version: "v1.30.0", Major: "1", Minor: "30", GitVersion: "v1.30.0"},
			APIVersions: APIVersions{"v1", "apps/v1", "batch/v1", "policy/v1", "autoscaling/v2", "networking.k8s.io/v1", "monitoring.coreos.com/v1"},
		},
		"Files": map[string]interface{}{},
	}

	basePath := path.Join(meta.Name, "templates")
	root := template.New("gotpl").Option("missingkey=zero")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	depth := map[string]int{}
	funcs["include"] = func(name string, data interface{}) (string, error) {
		if depth[name] > 1000 {
			return "", fmt.Errorf("include %q: nested too deeply", name)
		}
		depth[name]++
		defer func() { depth[name]-- }()
		var out strings.Builder
		err := root.ExecuteTemplate(&out, name, data)
		return out.String(), err
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		if _, err := t.New("tpl").Parse(text); err != nil {
			return "", err
		}
		var out strings.Builder
		err = t.ExecuteTemplate(&out, "tpl", data)
		return strings.ReplaceAll(out.String(), "<no value>", ""), err
	}
	funcs["required"] = func(message string, value interface{}) (interface{}, error) {
		if value == nil {
			return nil, errors.New(message)
		}
		if s, ok := value.(string); ok && s == "" {
			return nil, errors.New(message)
		}
		return value, nil
	}
	funcs["toYaml"] = func(v interface{}) string {
		data, err := yaml.Marshal(v)
		if err != nil {
			return ""
		}
		return strings.TrimSuffix(string(data), "\n")
	}
	funcs["fromYaml"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	funcs["toJson"] = func(v interface{}) string {
		data, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(data)
	}
	funcs["fromJson"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	// Like `helm template`: no cluster, so lookup finds nothing.
	funcs["lookup"] = func(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	root.Funcs(funcs)

	entries, err := os.ReadDir(filepath.Join(chartDir, "templates"))
	if err != nil {
		return err
	}
	var names []string
	for _, entry := range entries {
		if entry.IsDir() {
			return fmt.Errorf("templates/%s: subfolders are not supported by this renderer", entry.Name())
		}
		data, err := os.ReadFile(filepath.Join(chartDir, "templates", entry.Name()))
		if err != nil {
			return err
		}
		name := path.Join(basePath, entry.Name())
		if _, err := root.New(name).Parse(string(data)); err != nil {
			return fmt.Errorf("parse error: %w", err)
		}
		names = append(names, name)
	}
	sort.Strings(names)

	manifests := map[string]string{}
	notes := ""
	for _, name := range names {
		if strings.HasPrefix(path.Base(name), "_") {
			continue
		}
		top["Template"] = map[string]interface{}{"Name": name, "BasePath": basePath}
		var out strings.Builder
		if err := root.ExecuteTemplate(&out, name, top); err != nil {
			return fmt.Errorf("execution error: %w", err)
		}
		text := strings.ReplaceAll(out.String(), "<no value>", "")
		if path.Base(name) == "NOTES.txt" {
			notes = text
		} else {
			manifests[name] = text
		}
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]interface{}{"manifests": manifests, "notes": notes})
}

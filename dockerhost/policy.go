package dockerhost

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/hostgate/hostgate/internal/deadline"
	"github.com/hostgate/hostgate/internal/textcut"
)

// Container paths the policy mounts.
const (
	WorkspaceDir = "/workspace"
	// WorkspaceTempDir is the TMPDIR Config.TempDir is meant for: the root
	// filesystem, /tmp with it, is read-only, and under the workspace a
	// temporary file counts against diskBytes like any other.
	WorkspaceTempDir = WorkspaceDir + "/.tmp"
	// ToolsDir is where Config.Tools are, e.g. the in-container agent
	// binary: a volume mounted read-only (see toolsVolume).
	ToolsDir = "/opt/hostgate"
)

// Labels every container of this package carries; Adopt finds executions
// by them after a restart.
const (
	LabelExecution = "hostgate.execution"
	LabelExpires   = "hostgate.expires" // unix seconds
	LabelOwner     = "hostgate.owner"
	LabelSpec      = "hostgate.spec" // the provision request as JSON, env values removed
	// LabelStateDir is the state dir of the gateway that made the
	// container, when it sets it in Config.Labels: Elsewhere reports it,
	// so that a gateway started from another path can name the one that
	// adopts the container.
	LabelStateDir = "hostgate.state-dir"
)

// ownLabels are all the label keys this package sets or reads on
// containers. The engine merges an image's labels into those of a
// container made from it, the container's own winning only for the keys
// it sets: an image with LABEL hostgate.pool=1 made its executions look
// like a previous run's warm containers (Adopt reaped them), one with
// hostgate.tools=OWNER like tools volume holders (removed at Close). So
// every container made here sets each of these keys (setOwnLabels), ""
// where it has no value, and every reader takes "" for none: a filter on a
// key's value never names "" (owners are not empty), Elsewhere skips an
// empty owner (its filter is on the key alone), LabelPool is tested
// against "", LabelExecution, LabelExpires and LabelSpec that do not parse
// make a container unadoptable, and LabelStateDir "" is Foreign's "none".
// LabelUID "" is no uid (unadoptable) rather than legacyUID, but only the
// tools holder, which has no owner, carries it empty.
var ownLabels = []string{
	LabelExecution, LabelExpires, LabelOwner, LabelSpec, LabelStateDir,
	LabelUID, LabelDeadline, LabelPool, LabelPoolExpires, LabelTools,
}

// setOwnLabels sets each of ownLabels that labels lacks to "", so that no
// image's value for it reaches the container, and returns labels.
func setOwnLabels(labels map[string]string) map[string]string {
	for _, k := range ownLabels {
		if _, ok := labels[k]; !ok {
			labels[k] = ""
		}
	}
	return labels
}

// Policy validates requests and builds container configuration. Its zero
// value is not usable; NewDocker builds one from Config.
type Policy struct {
	AllowUnpinnedImages bool
	Max                 Resources // upper bounds; each field > 0
	// overMax says, by field, why its Max is what it is (engineMax), to
	// a request past it.
	overMax      map[string]string
	tools        *toolsVolume // mounted read-only at ToolsDir; nil: no ToolsDir
	deadlineTool string       // Config.DeadlineTool's path; "": deadlineScript
	// RepositoryRoots, when set, are the only directories git-worktree
	// repositories may be under: the API caller names a path on the
	// gateway's machine, so a shared gateway should confine it.
	RepositoryRoots []string
	// TempDir is the TMPDIR commands get unless their provision env sets
	// one; empty: none.
	TempDir string
}

// repositoryAllowed reports whether repo (absolute) is under a root. The
// path is cleaned first, so "/srv/repos/../etc" is not under /srv/repos;
// symlinks inside a root are the root owner's business.
func (p *Policy) repositoryAllowed(repo string) bool {
	if len(p.RepositoryRoots) == 0 {
		return true
	}
	repo = path.Clean(repo)
	for _, root := range p.RepositoryRoots {
		root = path.Clean(root)
		if repo == root || strings.HasPrefix(repo, strings.TrimSuffix(root, "/")+"/") {
			return true
		}
	}
	return false
}

// Lower bounds: below these a container cannot run sh and tar at all, or
// Docker refuses the value (memory below 6 MiB).
var minResources = Resources{
	CPUs:        0.01,
	MemoryBytes: 6 << 20,
	DiskBytes:   64 << 10,
	// The limit counts threads, and every sandbox holds its init and
	// deadline (the agent as PID 1, 9 threads, capped at 12; or docker-init, a
	// shell and its sleep) and the agent's 10 threads (made as it starts, before
	// any command: internal/agent's stdioThreads): under 16 the agent
	// could not start, or died making a thread (Go treats that as fatal).
	// At 16 commands had 2 tasks (CommandTasks), and every thread the
	// agent grew past its 10 took one of them for good: at 32 they have
	// 16 and the agent 4 to grow by.
	Pids:           32,
	RuntimeMs:      1000,
	MaxOutputBytes: 1,
}

// DefaultMaxResources bounds what one request may ask for. Output is held
// in memory by Exec, hence its modest bound.
func DefaultMaxResources() Resources {
	return Resources{
		CPUs:           float64(runtime.NumCPU()),
		MemoryBytes:    64 << 30,
		DiskBytes:      64 << 30,
		Pids:           32768,
		RuntimeMs:      int64(24 * time.Hour / time.Millisecond),
		MaxOutputBytes: 64 << 20,
	}
}

var (
	executionIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	envNameRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	digestRE      = regexp.MustCompile(`^[a-z0-9][a-z0-9._:/-]*@sha256:[0-9a-f]{64}$`)
	sha1or256RE   = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
)

// secretWords are matched against an env name lowercased with everything
// but letters and digits removed, so API_KEY, api-key and ApiKey all hit.
var secretWords = []string{"token", "secret", "password", "passwd", "passphrase", "apikey", "credential", "privatekey", "accesskey", "bearer"}

// benignWords hold a secret word without being one: Hugging Face's
// TOKENIZERS_PARALLELISM is set by most of its users.
var benignWords = []string{"tokenizer"}

// secretNameWords are secret only as whole words of a name (DB_PASS,
// GH_PAT, CREDS), since as parts of a word they are not (PASSTHROUGH,
// PATH).
var secretNameWords = []string{"pass", "pat", "creds", "authorization"}

// ValidateProvision checks every field of req and fills defaults. Errors
// are *Error{Code: invalid_request} naming the field.
func (p *Policy) ValidateProvision(req *ProvisionRequest) error {
	if req.ExecutionID != "" && !executionIDRE.MatchString(req.ExecutionID) {
		return invalid("executionId", "must match %s", executionIDRE)
	}
	if err := p.validateImage(req.Image); err != nil {
		return err
	}
	switch req.Workspace.Kind {
	case WorkspaceEmpty:
		if req.Workspace.RepositoryPath != "" || req.Workspace.Revision != "" {
			return invalid("workspace", "an empty workspace takes no repositoryPath or revision")
		}
	case WorkspaceGitWorktree:
		if !path.IsAbs(req.Workspace.RepositoryPath) || strings.ContainsRune(req.Workspace.RepositoryPath, 0) {
			return invalid("workspace.repositoryPath", "must be an absolute path")
		}
		if !p.repositoryAllowed(req.Workspace.RepositoryPath) {
			// The caller is an admin: naming the roots tells them where
			// the repository must be, which "outside the roots" did not.
			return invalid("workspace.repositoryPath", "%q is outside the repository roots this gateway serves (%s, its --repository-roots): name a repository under one of them", req.Workspace.RepositoryPath, strings.Join(p.RepositoryRoots, ", "))
		}
		if err := validateRevision(req.Workspace.Revision); err != nil {
			return err
		}
	case "":
		return invalid("workspace.kind", "is required (%q or %q)", WorkspaceEmpty, WorkspaceGitWorktree)
	default:
		return invalid("workspace.kind", "unknown kind %q (want %q or %q)", req.Workspace.Kind, WorkspaceEmpty, WorkspaceGitWorktree)
	}
	if err := p.validateResources(req.Resources); err != nil {
		return err
	}
	switch req.Network.Mode {
	case "none":
	case "":
		return invalid("network.mode", `is required; only "none" is supported`)
	default:
		// Never a silent fallback to an ordinary Docker network.
		return invalid("network.mode", `%q is not supported; only "none" is`, req.Network.Mode)
	}
	if err := validateEnv("env", req.Env); err != nil {
		return err
	}
	return p.envSpace(req.Env)
}

// ValidateImage reports whether image is a reference the default policy
// provisions (pinned by a lower-case sha256 digest), with the error a
// provision naming it gets: a gateway checks its --sandbox-image with it at
// start rather than at each "New sandbox".
func ValidateImage(image string) error {
	return (&Policy{}).validateImage(image)
}

func (p *Policy) validateImage(image string) error {
	if image == "" {
		return invalid("image", "is required")
	}
	if len(image) > 512 || strings.ContainsFunc(image, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return invalid("image", "is not a valid image reference")
	}
	if p.AllowUnpinnedImages || digestRE.MatchString(image) {
		return validReference(image)
	}
	if digestRE.MatchString(strings.ToLower(image)) {
		// Pinned, but the engine takes names and digests in lower case only.
		return invalid("image", "%q: image names and sha256 digests are lower case; use %q", image, strings.ToLower(image))
	}
	return invalid("image", "%q is not pinned by an immutable digest (NAME@sha256:<64 hex>); pin it with: docker inspect --format '{{index .RepoDigests 0}}' %s", image, image)
}

// validReference refuses an image reference that the engine would not
// parse (docker pull's grammar): it went to the engine, which answered
// "invalid reference format", and the caller got "the engine refused the
// container", which named neither the field nor what was wrong.
func validReference(image string) error {
	if _, err := reference.ParseNormalizedNamed(image); err != nil {
		return invalid("image", "%q is not a valid image reference (%v): want NAME@sha256:<64 hex>, NAME as docker pull takes it: [HOST[:PORT]/]PATH, lower case, each path component letters and digits joined by one '.', one or two '_' or any '-', at most 255 characters", image, err)
	}
	return nil
}

func validateRevision(rev string) error {
	switch {
	case rev == "":
		return invalid("workspace.revision", "is required for a git-worktree workspace")
	case strings.HasPrefix(rev, "-"):
		return invalid("workspace.revision", "must not start with '-'")
	case len(rev) > 256 || strings.ContainsFunc(rev, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return invalid("workspace.revision", "is not a valid revision")
	}
	return nil
}

func (p *Policy) validateResources(r Resources) error {
	type check struct {
		field    string
		v        float64
		min, max float64
		why      string // said when v is under min
	}
	for _, c := range []check{
		{"resources.cpus", r.CPUs, minResources.CPUs, p.Max.CPUs, ""},
		{"resources.memoryBytes", float64(r.MemoryBytes), float64(minResources.MemoryBytes), float64(p.Max.MemoryBytes), ""},
		{"resources.diskBytes", float64(r.DiskBytes), float64(minResources.DiskBytes), float64(p.Max.DiskBytes), ""},
		{"resources.pids", float64(r.Pids), float64(minResources.Pids), float64(p.Max.Pids), p.pidsWhy()},
		{"resources.runtimeMs", float64(r.RuntimeMs), float64(minResources.RuntimeMs), float64(p.Max.RuntimeMs), ""},
		{"resources.maxOutputBytes", float64(r.MaxOutputBytes), float64(minResources.MaxOutputBytes), float64(p.Max.MaxOutputBytes), ""},
	} {
		switch {
		case c.v == 0:
			return invalid(c.field, "is required")
		case math.IsNaN(c.v) || c.v < c.min || c.v > c.max:
			// 'f', -1: 6291456, not %v's 6.291456e+06.
			most := strconv.FormatFloat(c.max, 'f', -1, 64)
			why := ""
			switch {
			case c.v < c.min:
				why = c.why
			case c.v > c.max && p.overMax[c.field] != "":
				why = "; " + p.overMax[c.field] + ": ask for at most " + most
			}
			return invalid(c.field, "must be between %s and %s%s", strconv.FormatFloat(c.min, 'f', -1, 64), most, why)
		}
	}
	return nil
}

// validateEnv refuses malformed names and names that look like they carry a
// credential: a checkpoint or a log must never hold one, and the seed keeps
// credentials out of executions altogether.
func validateEnv(field string, env map[string]string) error {
	if len(env) > 256 {
		return invalid(field, "at most 256 variables")
	}
	for name, value := range env {
		if !envNameRE.MatchString(name) || len(name) > 256 {
			// Cut short: the name may be most of an 8 MiB exec body.
			return invalid(field+"."+textcut.Cut(name, 64), "is not a valid environment variable name (want letters, digits and '_', not starting with a digit, at most 256 bytes)")
		}
		if looksSecret(name) {
			return invalid(field+"."+name, "looks like a credential (token, secret, password, API key, credential): an execution's environment is kept in its container's configuration; write the credential into the workspace or pass it on the stdin of the command that needs it")
		}
		if strings.ContainsRune(value, 0) || len(value) > 32<<10 {
			return invalid(field+"."+name, "value must be under 32 KiB without NUL bytes")
		}
	}
	return nil
}

func looksSecret(name string) bool {
	words := envWords(name)
	n := strings.Join(words, "")
	for _, b := range benignWords {
		n = strings.ReplaceAll(n, b, "")
	}
	if slices.ContainsFunc(secretWords, func(w string) bool { return strings.Contains(n, w) }) {
		return true
	}
	for i, w := range words {
		last := i == len(words)-1
		switch {
		case slices.Contains(secretNameWords, w):
			return true
		case w == "pwd" && len(words) > 1: // PWD alone is the working directory
			return true
		case last && len(words) > 1 && (w == "key" || w == "keys") && words[i-1] != "public":
			return true // OPENAI_KEY, SIGNING_KEY, SSH_KEY
		case last && (w == "jwt" || w == "cookie"):
			return true
		case w == "auth" && authValue(words, i):
			return true // NPM_AUTH, BASIC_AUTH, AUTH_HEADER
		}
	}
	return false
}

// authSettingWords, before auth, make a name a setting about auth
// (SKIP_AUTH, MOCK_AUTH), not an auth value.
var authSettingWords = []string{"skip", "disable", "disabled", "enable", "enabled", "no", "use", "require", "required",
	"mock", "fake", "has", "with", "bypass", "dev", "allow", "optional", "test"}

// authValue reports whether the whole word auth at words[i] names an
// auth value (NPM_AUTH, AUTH, AUTH_HEADER) rather than a setting about
// auth (SKIP_AUTH, AUTH_URL, AUTH_MODE, nextAuthUrl).
func authValue(words []string, i int) bool {
	if i > 0 && slices.Contains(authSettingWords, words[i-1]) {
		return false
	}
	return i == len(words)-1 || words[i+1] == "header"
}

// envWords splits an env name into lowercase words at anything but
// letters and digits and at camelCase humps: "NpmToken" and "NPM_TOKEN"
// are both [npm token].
func envWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(name)
	for i, r := range rs {
		switch {
		case !(unicode.IsLetter(r) || unicode.IsDigit(r)):
			flush()
		case unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsUpper(rs[i-1]) && unicode.IsLower(rs[i+1])):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return words
}

// ValidateExec checks an exec request and fills defaults.
func (p *Policy) ValidateExec(req *ExecRequest) error {
	if req.Command == "" {
		return invalid("command", "is required")
	}
	if strings.ContainsRune(req.Command, 0) {
		return invalid("command", "must not contain NUL bytes")
	}
	if slices.ContainsFunc(req.Args, func(a string) bool { return strings.ContainsRune(a, 0) }) {
		return invalid("args", "must not contain NUL bytes")
	}
	if req.Cwd == "" {
		req.Cwd = WorkspaceDir
	}
	if !path.IsAbs(req.Cwd) || strings.ContainsRune(req.Cwd, 0) {
		return invalid("cwd", "must be an absolute path")
	}
	if err := argLen("command", req.Command); err != nil {
		return err
	}
	for i, a := range req.Args {
		if err := argLen(fmt.Sprintf("args[%d]", i), a); err != nil {
			return err
		}
	}
	if err := argLen("cwd", req.Cwd); err != nil {
		return err
	}
	switch {
	case req.TimeoutMs == 0:
		return invalid("timeoutMs", "is required")
	case req.TimeoutMs < 0 || req.TimeoutMs > p.Max.RuntimeMs:
		return invalid("timeoutMs", "must be between 1 and %d", p.Max.RuntimeMs)
	}
	return validateEnv("env", req.Env)
}

// maxArgLen is the longest one argument of a program may be, its NUL
// aside: Linux's MAX_ARG_STRLEN, 32 pages (128 KiB with 4 KiB pages).
var maxArgLen = 32*os.Getpagesize() - 1

// argLen refuses a command's word (its command, an argument, its cwd,
// each one argument of the shell that starts it) that no execve takes: it
// was answered 200 with exit code 1 and "exec /bin/sh: argument list too
// long" on stderr, as if the command had run and failed.
func argLen(field, word string) error {
	if len(word) > maxArgLen {
		return invalid(field, "is %d bytes, over the %d one argument of a program may hold (Linux's MAX_ARG_STRLEN); pass large data on stdin or in a file (SFTP)",
			len(word), maxArgLen)
	}
	return nil
}

// sleepSeconds is the in-container deadline: the main process sleeps this
// long, then the container stops and AutoRemove deletes it, even when no
// host process is left to terminate it.
func sleepSeconds(runtimeMs int64) int64 { return (runtimeMs + 999) / 1000 }

// provisionEnv is the environment an execution's commands get from its
// provision request: env, with the standard directories after a PATH of
// the caller's (the engine finds the main process, sleep, on that PATH,
// and a caller's PATH without it made the container exit at start), and
// HOME and TMPDIR in the workspace unless env sets them. The engine's
// HOME comes from the image's passwd (/nonexistent, /root, /tmp), all on
// the read-only root: tools that keep a cache or config in HOME failed.
// USER and LOGNAME name the user (SandboxUser unless env names one in
// either): a sandbox's uid is drawn for it (uids.go) and has no passwd
// entry, and the engine sets neither, so what asks the environment
// before passwd (Python's getpass.getuser, npm, shells' prompts, scripts
// that build paths from $USER) found no user at all.
func (p *Policy) provisionEnv(env map[string]string) map[string]string {
	env = maps.Clone(env)
	if env == nil {
		env = map[string]string{}
	}
	if path, ok := env["PATH"]; ok {
		env["PATH"] = strings.TrimSuffix(path, ":") + ":" + defaultPath
	}
	if _, ok := env["HOME"]; !ok {
		env["HOME"] = WorkspaceDir
	}
	if _, ok := env["TMPDIR"]; !ok && p.TempDir != "" {
		env["TMPDIR"] = p.TempDir
	}
	user, ok := env["USER"]
	if !ok {
		if user, ok = env["LOGNAME"]; !ok {
			user = SandboxUser
		}
	}
	for _, k := range []string{"USER", "LOGNAME"} {
		if _, ok := env[k]; !ok {
			env[k] = user
		}
	}
	return env
}

// SandboxUser is the user name a sandbox's commands find in USER and
// LOGNAME unless the provision env gives one.
const SandboxUser = "sandbox"

// defaultPath is Docker's PATH for an image that sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// defaultShmSize is Docker's /dev/shm size.
const defaultShmSize = 64 << 20

// WorkspaceSize is the size of the /workspace tmpfs: diskBytes, but never
// more than the memory limit leaves room for. A tmpfs lives in memory and
// is charged to the container's memory limit, so a workspace filled past
// that limit did not end in ENOSPC: the OOM killer took the execution's
// processes (its agent first, the largest), and the full tmpfs kept every
// process started after from running. A diskBytes over memoryBytes is
// accepted, as the seed's own example asks for one, and gets ENOSPC at
// its part of workspaceShare: all of it but the inodes'
// workspaceInodeRatio keeps.
func WorkspaceSize(r Resources) int64 {
	share := workspaceShare(r)
	data := share - share*tmpfsInodeBytes/(workspaceInodeRatio+tmpfsInodeBytes)
	// Whole pages: the kernel rounds a tmpfs's size up to one.
	return max(minResources.DiskBytes, min(r.DiskBytes, data&^(4096-1)))
}

// workspaceShare is the memory the workspace's data and its inodes share:
// the limit less half the headroom, left to processes, and less all that
// /dev/shm may hold. A tmpfs's size bounds its data pages and nr_inodes
// its inodes, each alone: with the data bound at the limit less the
// headroom and the inode bound at the limit less half of it, a command
// that filled the data of a workspace asked larger than memory and then
// made empty files took the sandbox past its limit, and the OOM killer
// took its agent and every command after. Both bounds are cut from this
// one share, so the two together fit it.
func workspaceShare(r Resources) int64 {
	h := workspaceHeadroom(r.MemoryBytes)
	return r.MemoryBytes - h/2 - shmSize(r) - shmInodes(r)*tmpfsInodeBytes
}

// workspaceHeadroom is the memory kept for processes when the workspace
// is full: an eighth of the limit, from 16 MiB (the agent alone takes
// about 10) to 256 MiB; but never more than half of a small limit, so
// that a small memory limit does not shrink a smaller disk to nothing.
func workspaceHeadroom(memoryBytes int64) int64 {
	return min(max(memoryBytes/8, min(16<<20, memoryBytes/2)), 256<<20)
}

// tmpfsInodeBytes is what one file, directory or symlink of a tmpfs costs
// the memory limit besides its data, rounded up: Linux 6.18 with cgroup v1
// charged 1166 bytes per empty file and 1035 per directory.
const tmpfsInodeBytes = 1536

// workspaceInodeRatio is the workspace bytes per inode kept for a
// workspace whose data takes all it may: mke2fs's default inode_ratio, so
// such a workspace holds as many files as an ext4 disk of its size.
const workspaceInodeRatio = 16 << 10

// WorkspaceInodes is the /workspace tmpfs's nr_inodes: what of
// workspaceShare its data (WorkspaceSize) leaves. Its size bounds data
// pages only, and by default a tmpfs allows half the host's RAM pages in
// inodes: a loop of empty files filled a 256 MiB sandbox's memory limit,
// after which every command was OOM-killed at once (exit 137), the agent
// too, and no command could remove them. With this bound those files end
// in ENOSPC, with the data full or not, while half the headroom is left
// to processes.
func WorkspaceInodes(r Resources) int64 {
	return max(16, (workspaceShare(r)-WorkspaceSize(r))/tmpfsInodeBytes)
}

// shmInodes is the /dev/shm tmpfs's nr_inodes: one a page, as many as
// files of data it can hold, a few MiB of memory at most. POSIX shared
// memory and semaphores are a handful of files.
func shmInodes(r Resources) int64 { return max(1024, shmSize(r)/4096) }

// shmSize is the /dev/shm size: a quarter of the headroom, at most
// Docker's 64 MiB, and no more than the disk asked for.
func shmSize(r Resources) int64 {
	return min(workspaceHeadroom(r.MemoryBytes)/4, defaultShmSize, r.DiskBytes)
}

// ContainerConfig builds the hardened container for a validated request,
// whose processes run as uid (and a gid of the same number).
func (p *Policy) ContainerConfig(id string, uid int, req ProvisionRequest, expires time.Time, labels map[string]string) (*container.Config, *container.HostConfig, error) {
	if uid <= 0 {
		return nil, nil, fmt.Errorf("container uid %d: must be non-root", uid)
	}
	spec, err := json.Marshal(redact(req))
	if err != nil {
		return nil, nil, fmt.Errorf("marshal spec label: %w", err)
	}
	all := map[string]string{}
	for k, v := range labels {
		all[k] = v
	}
	all[LabelExecution] = id
	all[LabelExpires] = strconv.FormatInt(expires.Unix(), 10)
	all[LabelSpec] = string(spec)
	all[LabelUID] = strconv.Itoa(uid)
	all[LabelDeadline] = deadlineByScript
	// The container's user is its PID 1's; every exec names the
	// sandbox's (userOf(uid)).
	user := userOf(uid)
	if p.deadlineTool != "" {
		all[LabelDeadline] = deadlineByInit
		user = userOf(initUID(uid))
	}
	// The image's hostgate.* labels must not show through: every key of
	// this package is the container's own.
	setOwnLabels(all)

	env := make([]string, 0, len(req.Env))
	for k, v := range p.provisionEnv(req.Env) {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	r := req.Resources
	useInit := p.deadlineTool == ""
	pids := r.Pids
	cfg := &container.Config{
		Image:      req.Image,
		User:       user,
		Env:        env,
		Entrypoint: deadlineArgv(p.deadlineTool, strconv.FormatInt(sleepSeconds(r.RuntimeMs), 10)),
		WorkingDir: WorkspaceDir,
		Labels:     all,
	}
	tmpfs := map[string]string{
		// exec: workspaces hold scripts and build outputs that must run.
		WorkspaceDir: fmt.Sprintf("size=%d,nr_inodes=%d,uid=%d,gid=%d,mode=0700,exec", WorkspaceSize(r), WorkspaceInodes(r), uid, uid),
		// /dev/shm is a tmpfs too (64 MiB by default): it gets a part of
		// the headroom the workspace leaves, so both full still leave
		// processes room to run. Mounted here, not sized by ShmSize, for
		// its inodes: Docker's own mount has the default nr_inodes, and
		// empty files there filled the memory limit as in the workspace.
		"/dev/shm": fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777,nosuid,nodev,noexec", shmSize(r), shmInodes(r)),
	}
	if p.deadlineTool != "" {
		// Where PID 1 leaves its environment copy: a directory no sandbox
		// process can write in or make first, as /dev/shm is everyone's.
		// One page of data is all it holds.
		tmpfs[deadline.InitDir] = fmt.Sprintf("size=65536,nr_inodes=8,uid=%d,gid=%d,mode=0755,nosuid,nodev,noexec", initUID(uid), initUID(uid))
	}
	mounts := []mount.Mount{ptsMount()}
	if p.tools != nil {
		mounts = append(mounts, p.tools.mount(false))
	}
	hc := &container.HostConfig{
		NetworkMode:    "none",
		AutoRemove:     true,
		ReadonlyRootfs: true,
		SecurityOpt:    []string{"no-new-privileges"},
		CapDrop:        []string{"ALL"},
		// An init reaps orphans of exec'd commands, which would otherwise
		// pile up as zombies against the pids limit under sleep as PID 1;
		// a deadline tool is its own init (explicitly off: a daemon may
		// default to one).
		Init:   &useInit,
		Tmpfs:  tmpfs,
		Mounts: mounts,
		// The container's own stdout and stderr are docker-init's, whose
		// /proc/1/fd/1 every command may open, as it runs as the same
		// user: under the engine's default json-file driver, without a
		// size bound, what a command wrote there went to a log file on
		// the host's disk, outside diskBytes and every other limit (100
		// MiB in a second, without end). Nothing reads that log: sleep,
		// the main process, writes nothing.
		LogConfig: container.LogConfig{Type: "none"},
		Resources: container.Resources{
			NanoCPUs:   int64(math.Round(r.CPUs * 1e9)),
			Memory:     r.MemoryBytes,
			MemorySwap: r.MemoryBytes, // equal: no swap
			PidsLimit:  &pids,
			// Commands may fork up to the limit less what the agent keeps
			// for its threads (the agent raises its own soft limit to the
			// hard one and gives its commands this one), docker exec's
			// processes too.
			// The stack's soft limit sizes what a command's arguments
			// and environment may take (argSpace); -1 keeps the hard
			// one unlimited, as the engine gave it.
			Ulimits: []*container.Ulimit{
				{Name: "nproc", Soft: CommandTasks(pids) - p.initTasks(), Hard: pids - p.initTasks()},
				{Name: "stack", Soft: SandboxStack, Hard: -1},
				// No core dumps, and none to be allowed: a core_pattern
				// that pipes (systemd-coredump, apport: most
				// distributions') hands each core to a helper running as
				// root on the host, outside the sandbox's cgroup, which
				// stores it on the host's disk, so crashing processes in
				// a loop spent the host's CPU and disk past every limit.
				// Those helpers honour a core size of 0.
				{Name: "core", Soft: 0, Hard: 0},
			},
		},
	}
	return cfg, hc, nil
}

// SandboxPTYs is how many pseudo-terminals one sandbox may hold at once:
// four agent connections' worth of terminal sessions (sshlayer's
// DefaultMaxSessions, 64 each).
const SandboxPTYs = 256

// ptsMount is the sandbox's /dev/pts: a devpts instance of its own with
// at most SandboxPTYs terminals. Terminals are counted machine-wide
// (kernel.pty.max, 4096 by default, a quarter kept for the host) and
// Docker's own /dev/pts for a container sets no max, so one sandbox held
// 3,071 and every other sandbox's terminal (the web terminal, ssh -t)
// failed with ENOSPC. The engine's local volume driver mounts it (Docker
// has no other way to give a mount its options), as an anonymous volume
// that goes with its container (AutoRemove, destroy's RemoveVolumes). The
// container's /dev/ptmx is a symlink to pts/ptmx, so every terminal opened
// in the sandbox, docker exec -t's too, comes from this instance. The
// options are Docker's own for /dev/pts; NoCopy, as nothing of the image
// belongs on a devpts.
func ptsMount() mount.Mount {
	return mount.Mount{
		Type:   mount.TypeVolume,
		Target: "/dev/pts",
		VolumeOptions: &mount.VolumeOptions{
			NoCopy: true,
			DriverConfig: &mount.Driver{Name: "local", Options: map[string]string{
				"type":   "devpts",
				"device": "devpts",
				"o":      fmt.Sprintf("nosuid,noexec,newinstance,ptmxmode=0666,mode=0620,gid=5,max=%d", SandboxPTYs),
			}},
		},
	}
}

// readOnlyVolumes is hc with an empty read-only tmpfs at each of vols,
// the image's VOLUMEs, that no mount of hc covers. The engine gives a
// VOLUME an anonymous volume otherwise (a tmpfs at its path keeps it
// from making one): a directory on the engine's disk, writable where the
// image's directory is (VOLUME /tmp, mode 1777), which neither the
// read-only root nor diskBytes bounds; sandbox code filled it without
// limit. What the image holds there is hidden, as a volume of it would
// be data of the container's, and the container keeps none outside
// /workspace.
func readOnlyVolumes(hc *container.HostConfig, vols []string) *container.HostConfig {
	var add []string
	for _, v := range vols {
		v = path.Clean(v)
		if _, ok := hc.Tmpfs[v]; ok || !path.IsAbs(v) || slices.ContainsFunc(hc.Mounts, func(m mount.Mount) bool { return path.Clean(m.Target) == v }) {
			continue
		}
		add = append(add, v)
	}
	if len(add) == 0 {
		return hc
	}
	c := *hc
	c.Tmpfs = maps.Clone(hc.Tmpfs)
	if c.Tmpfs == nil {
		c.Tmpfs = map[string]string{}
	}
	for _, v := range add {
		c.Tmpfs[v] = "ro,size=4096,nosuid,nodev,noexec"
	}
	return &c
}

// CommandTasks is how many tasks (processes and threads) a sandbox's
// commands may hold under a pids limit of pids: the limit less an eighth
// (at least 2, at most 32) that the agent keeps for threads it may need
// later. The limit counts the agent's threads too, and a thread the Go
// runtime needs and cannot create is fatal: commands that took every pid
// left cost the agent, with every command's channel (e2e
// TestSandboxPidsLimitKeepsAgent, under CI's load, though the agent makes
// its threads as it starts). At the least limit, 32, with
// Config.DeadlineTool the soft ulimit is this less PID 1's initTasks, 16
// (the agent's 10 threads among them), and commands get 6 tasks; with
// docker-init, a shell and its sleep, of the sandbox's uid, commands get
// about 15. Either way the agent may grow by 4 threads.
func CommandTasks(pids int64) int64 {
	return pids - min(max(pids/8, 2), 32)
}

// agentThreads is what the sandbox's agent holds of its pids limit from
// its start: internal/agent's stdioThreads.
const agentThreads = 10

// pidsWhy says, to a caller whose pids limit is under the least, where
// the least comes from. It said "about 16" once PID 1 had become the
// deadline tool with 12 kept for it, and the agent's 10 threads made 22.
func (p *Policy) pidsWhy() string {
	if p.initTasks() == 0 {
		return fmt.Sprintf("; it counts threads: the sandbox's init (docker-init, a shell and its sleep) and the agent hold about %d, and the agent keeps an eighth of the limit (4 to 32) from commands", 3+agentThreads)
	}
	return fmt.Sprintf("; it counts threads: the sandbox's init and deadline (%d kept for it) and the agent (%d threads) hold about %d, and the agent keeps an eighth of the limit (4 to 32) from commands: at %d they get %d tasks",
		p.initTasks(), agentThreads, p.initTasks()+agentThreads, minResources.Pids, CommandTasks(minResources.Pids)-p.initTasks()-agentThreads)
}

// initTasks is what of a sandbox's pids limit PID 1 takes when it is the
// deadline tool under a uid of its own (deadlineByInit): its threads, all
// made as it starts, which its cgroup counts but the sandbox uid's
// RLIMIT_NPROC does not, and which it caps at deadline.MaxTasks itself
// (its uid's RLIMIT_NPROC). The nproc ulimit leaves them out, as it
// counted them when PID 1 was of the sandbox's uid: else commands could
// take every pid the limit leaves, and the agent would die making a
// thread. The agent does the same (internal/agent's othersThreads).
func (p *Policy) initTasks() int64 {
	if p.deadlineTool == "" {
		return 0
	}
	return deadline.MaxTasks
}

// redact returns req without environment values, which may be sensitive
// even when their names are not: labels and manifests keep names only.
func redact(req ProvisionRequest) ProvisionRequest {
	if len(req.Env) > 0 {
		names := make(map[string]string, len(req.Env))
		for k := range req.Env {
			names[k] = ""
		}
		req.Env = names
	}
	return req
}

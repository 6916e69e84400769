package main

import (
	"fmt"
	"strings"

	"github.com/kwire/kwire/aggregate/wire"
)

// Agents' keys (docs/aggregate.md, "Running agents and aggregator
// safely"): an agent signs its batches with its own key, the aggregator
// verifies each with the key of the agent it names. Keys are read from a
// file or the environment, never a flag (it would show in ps), and never
// printed.
const (
	// publishKeyEnv holds an agent's key line (as --publish-key-file).
	publishKeyEnv = "KWIRE_PUBLISH_KEY"
	// agentKeysEnv holds the aggregator's key lines (as --agent-key-file).
	agentKeysEnv = "KWIRE_AGENT_KEYS"
)

// readKeys reads keys from file, named by flag in errors, or else from
// the environment variable env; no file and an empty variable: none.
// source says where they came from.
func readKeys(flag, file, env string) (keys []wire.Key, source string, err error) {
	text, source, err := readSecret(flag, file, env)
	if err != nil || text == nil {
		return nil, "", err
	}
	if keys, err = wire.ParseKeys(text); err != nil {
		return nil, "", fmt.Errorf("%s: %w", source, err)
	}
	return keys, source, nil
}

// agentKey reads the agent's key (--publish-key-file or
// $KWIRE_PUBLISH_KEY) and returns it with the agent's name: the key's,
// which --publish-agent, if given, must match; a shared key (agent *)
// leaves the name to --publish-agent or the host name. No key: nil.
func (f *publishFlags) agentKey() (*wire.Key, string, error) {
	keys, source, err := readKeys("publish-key-file", f.keyFile, publishKeyEnv)
	if err != nil || keys == nil {
		return nil, f.name, err
	}
	if len(keys) != 1 {
		return nil, "", fmt.Errorf("%s: %d keys: an agent is given its own key alone (the aggregator's --agent-key-file holds them all)", source, len(keys))
	}
	k := keys[0]
	switch {
	case k.Agent == wire.SharedAgent:
		return &k, f.name, nil
	case f.name != "" && f.name != k.Agent:
		return nil, "", fmt.Errorf("--publish-agent %s: the key of %s is agent %s's: an agent's name is its key's (drop --publish-agent, or give it %s's key)", f.name, source, k.Agent, f.name)
	}
	return &k, k.Agent, nil
}

// noKeyWarning is what an agent or aggregator without keys says at
// start-up.
func noKeyWarning(who, flag, env, topic string) string {
	return fmt.Sprintf("kwire: warning: %s without agent keys (--%s or $%s): anyone who can write to topic %s can pose as any agent and invent groups, members and commits; see docs/aggregate.md, \"Running agents and aggregator safely\"\n",
		who, flag, env, topic)
}

// keyNames lists the agents keys are for, for the start-up line.
func keyNames(keys []wire.Key) string {
	var names []string
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[k.Agent] {
			seen[k.Agent] = true
			names = append(names, k.Agent)
		}
	}
	return strings.Join(names, ", ")
}

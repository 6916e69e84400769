package kwire.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.utils.internals.Exit;
import org.apache.kafka.tools.consumer.group.ConsumerGroupCommand;

/**
 * Mode "admin": the Admin API paths operators use, and the describe calls
 * that give the truth. Args: client_id, ops (run in order): each an object
 * with op and its fields:
 * <ul>
 *   <li>create_topics: topics [{name, partitions}] (replication 1 unless
 *       replication set);</li>
 *   <li>alter_group_config: group, configs {name: value} (e.g. a share
 *       group's share.auto.offset.reset);</li>
 *   <li>reset_offsets: group, topic, to (earliest|latest|an offset): what
 *       {@code kafka-consumer-groups --reset-offsets --execute} does (the
 *       group must be empty: DescribeGroups, ListOffsets,
 *       OffsetCommit via alterConsumerGroupOffsets);</li>
 *   <li>kafka_consumer_groups: args, Kafka's own ConsumerGroupCommand run in
 *       this JVM (--bootstrap-server added), its output in the report;</li>
 *   <li>delete_offsets: group, topic, partitions (deleteConsumerGroupOffsets,
 *       kafka-consumer-groups --delete-offsets);</li>
 *   <li>delete_records: topic, partition, before (DeleteRecords);</li>
 *   <li>describe_groups / describe_share_groups / describe_streams_groups:
 *       groups;</li>
 *   <li>describe_transactions: transactional_ids (state, producer id and
 *       epoch, timeout, partitions);</li>
 *   <li>list_transactions: every transactional id the coordinators know
 *       (listTransactions: state, producer id);</li>
 *   <li>list_offsets: topic (earliest and latest of every partition);</li>
 *   <li>group_offsets: group (listConsumerGroupOffsets: the committed offsets).</li>
 * </ul>
 * Each op reports {@code admin}: op, ok, error, result. A failed op does not
 * stop the others unless stop_on_error. Ready: once the client is created.
 */
final class AdminMode {
    private AdminMode() {}

    static void run(Task t) throws Exception {
        JsonNode a = t.args;
        try (Admin admin = Admin.create(t.props(Main.str(a, "client_id", "kwire-java-admin")))) {
            t.out.ready();
            for (JsonNode op : a.path("ops")) {
                String name = Main.str(op, "op", "");
                ObjectNode n = t.out.report("admin");
                n.put("op", name);
                String group = Main.str(op, "group", null);
                if (group != null) {
                    n.put("target_group", group); // not "group": no member's report
                }
                try {
                    n.set("result", run(t, admin, name, op));
                    n.put("ok", true);
                } catch (Exception e) {
                    n.put("ok", false);
                    n.put("error", Out.error(e));
                }
                t.out.send(n);
                if (!n.get("ok").asBoolean() && Main.bool(a, "stop_on_error", false)) {
                    throw new IllegalStateException("admin op " + name + ": " + n.get("error").asText());
                }
            }
        }
    }

    private static JsonNode run(Task t, Admin admin, String name, JsonNode op) throws Exception {
        return switch (name) {
            case "create_topics" -> createTopics(admin, op);
            case "alter_group_config" -> {
                ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, Main.str(op, "group", ""));
                List<AlterConfigOp> ops = new ArrayList<>();
                op.path("configs").fields().forEachRemaining(e -> ops.add(new AlterConfigOp(
                        new ConfigEntry(e.getKey(), e.getValue().asText()), AlterConfigOp.OpType.SET)));
                admin.incrementalAlterConfigs(Map.of(r, ops)).all().get();
                yield op.path("configs");
            }
            case "reset_offsets" -> resetOffsets(admin, op);
            case "kafka_consumer_groups" -> tool(t, op);
            case "delete_offsets" -> {
                String topic = Main.str(op, "topic", "");
                Set<TopicPartition> tps = new HashSet<>();
                op.path("partitions").forEach(p -> tps.add(new TopicPartition(topic, p.asInt())));
                admin.deleteConsumerGroupOffsets(Main.str(op, "group", ""), tps).all().get();
                yield Out.assignment(tps);
            }
            case "delete_records" -> {
                TopicPartition tp = new TopicPartition(Main.str(op, "topic", ""), Main.num(op, "partition", 0));
                long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(op.path("before").asLong())))
                        .lowWatermarks().get(tp).get().lowWatermark();
                yield Out.JSON.createObjectNode().put("low_watermark", low);
            }
            case "describe_groups" -> describeGroups(admin, groups(op));
            case "describe_share_groups" -> describeShareGroups(admin, groups(op));
            case "describe_streams_groups" -> describeStreamsGroups(admin, groups(op));
            case "describe_transactions" -> {
                List<String> ids = new ArrayList<>();
                op.path("transactional_ids").forEach(x -> ids.add(x.asText()));
                ObjectNode r = Out.JSON.createObjectNode();
                for (var e : new TreeMap<>(admin.describeTransactions(ids).all().get()).entrySet()) {
                    var d = e.getValue();
                    ObjectNode o = r.putObject(e.getKey());
                    o.put("state", d.state().toString());
                    o.put("producer_id", d.producerId());
                    o.put("producer_epoch", d.producerEpoch());
                    o.put("timeout_ms", d.transactionTimeoutMs());
                    o.put("coordinator", d.coordinatorId());
                    o.set("partitions", Out.assignment(d.topicPartitions()));
                }
                yield r;
            }
            case "list_transactions" -> {
                ObjectNode r = Out.JSON.createObjectNode();
                for (var l : admin.listTransactions().all().get()) {
                    ObjectNode o = r.putObject(l.transactionalId());
                    o.put("state", l.state().toString());
                    o.put("producer_id", l.producerId());
                }
                yield r;
            }
            case "list_offsets" -> {
                String topic = Main.str(op, "topic", "");
                ObjectNode r = Out.JSON.createObjectNode();
                r.set("earliest", Out.offsets(listOffsets(admin, topic, OffsetSpec.earliest())));
                r.set("latest", Out.offsets(listOffsets(admin, topic, OffsetSpec.latest())));
                yield r;
            }
            case "group_offsets" -> {
                Map<TopicPartition, Long> o = new HashMap<>();
                admin.listConsumerGroupOffsets(Main.str(op, "group", "")).partitionsToOffsetAndMetadata().get()
                        .forEach((tp, om) -> o.put(tp, om == null ? -1 : om.offset()));
                yield Out.offsets(o);
            }
            default -> throw new IllegalArgumentException("unknown admin op " + name);
        };
    }

    private static List<String> groups(JsonNode op) {
        List<String> gs = new ArrayList<>();
        op.path("groups").forEach(g -> gs.add(g.asText()));
        return gs;
    }

    private static JsonNode createTopics(Admin admin, JsonNode op) throws Exception {
        List<NewTopic> ts = new ArrayList<>();
        short rf = (short) Main.num(op, "replication", 1);
        op.path("topics").forEach(tn -> ts.add(new NewTopic(Main.str(tn, "name", ""), Main.num(tn, "partitions", 1), rf)));
        admin.createTopics(ts).all().get();
        ArrayNode r = Out.JSON.createArrayNode();
        ts.forEach(nt -> r.add(nt.name()));
        return r;
    }

    static Map<TopicPartition, Long> listOffsets(Admin admin, String topic, OffsetSpec spec) throws Exception {
        int n = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
        Map<TopicPartition, OffsetSpec> q = new HashMap<>();
        for (int p = 0; p < n; p++) {
            q.put(new TopicPartition(topic, p), spec);
        }
        Map<TopicPartition, Long> o = new HashMap<>();
        admin.listOffsets(q).all().get().forEach((tp, info) -> o.put(tp, info.offset()));
        return o;
    }

    /** resetOffsets is ConsumerGroupCommand's --reset-offsets --execute for --to-earliest, --to-latest, --to-offset. */
    private static JsonNode resetOffsets(Admin admin, JsonNode op) throws Exception {
        String group = Main.str(op, "group", ""), topic = Main.str(op, "topic", ""), to = Main.str(op, "to", "earliest");
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
        GroupState st = d.groupState();
        if (st != GroupState.EMPTY && st != GroupState.DEAD) {
            throw new IllegalStateException("assignments can only be reset if the group '" + group
                    + "' is inactive, but the current state is " + st);
        }
        Map<TopicPartition, Long> target = switch (to) {
            case "earliest" -> listOffsets(admin, topic, OffsetSpec.earliest());
            case "latest" -> listOffsets(admin, topic, OffsetSpec.latest());
            default -> {
                Map<TopicPartition, Long> o = new HashMap<>();
                listOffsets(admin, topic, OffsetSpec.latest()).keySet().forEach(tp -> o.put(tp, Long.parseLong(to)));
                yield o;
            }
        };
        Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
        target.forEach((tp, off) -> commit.put(tp, new OffsetAndMetadata(off)));
        admin.alterConsumerGroupOffsets(group, commit).all().get();
        return Out.offsets(target);
    }

    /** tool runs kafka-consumer-groups (ConsumerGroupCommand) in this JVM, its output captured. */
    private static synchronized JsonNode tool(Task t, JsonNode op) {
        List<String> args = new ArrayList<>(List.of("--bootstrap-server", t.bootstrap()));
        op.path("args").forEach(x -> args.add(x.asText()));
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PrintStream prev = System.out, prevErr = System.err;
        int[] code = {0};
        Exit.setExitProcedure((c, msg) -> {
            code[0] = c;
            throw new ToolExit();
        });
        try (PrintStream ps = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
            System.setOut(ps);
            System.setErr(ps);
            ConsumerGroupCommand.main(args.toArray(new String[0]));
        } catch (ToolExit e) {
            // Exit.exit: code[0] says how
        } finally {
            System.setOut(prev);
            System.setErr(prevErr);
            Exit.resetExitProcedure();
        }
        String text = buf.toString(StandardCharsets.UTF_8);
        if (code[0] != 0 || text.startsWith("Error:") || text.contains("\nError:")) {
            throw new IllegalStateException("kafka-consumer-groups " + String.join(" ", args) + " (exit " + code[0] + "): " + text.strip());
        }
        return Out.JSON.createObjectNode().put("output", text);
    }

    private static final class ToolExit extends RuntimeException {
        ToolExit() {
            super(null, null, false, false);
        }
    }

    private static JsonNode describeGroups(Admin admin, List<String> groups) throws Exception {
        ObjectNode r = Out.JSON.createObjectNode();
        for (Map.Entry<String, ConsumerGroupDescription> e : new TreeMap<>(admin.describeConsumerGroups(groups).all().get()).entrySet()) {
            ConsumerGroupDescription d = e.getValue();
            ObjectNode g = r.putObject(e.getKey());
            g.put("state", d.groupState().toString());
            g.put("type", d.type().toString());
            g.put("protocol", d.partitionAssignor());
            g.put("coordinator", d.coordinator() == null ? -1 : d.coordinator().id());
            d.groupEpoch().ifPresent(x -> g.put("group_epoch", x));
            d.targetAssignmentEpoch().ifPresent(x -> g.put("target_assignment_epoch", x));
            ArrayNode ms = g.putArray("members");
            for (MemberDescription m : d.members()) {
                ObjectNode mo = ms.addObject();
                mo.put("member_id", m.consumerId());
                mo.put("client_id", m.clientId());
                mo.put("client_host", m.host());
                m.groupInstanceId().ifPresent(x -> mo.put("instance_id", x));
                m.memberEpoch().ifPresent(x -> mo.put("member_epoch", x));
                m.upgraded().ifPresent(x -> mo.put("upgraded", x));
                mo.set("assignment", Out.assignment(m.assignment().topicPartitions()));
            }
        }
        return r;
    }

    private static JsonNode describeShareGroups(Admin admin, List<String> groups) throws Exception {
        ObjectNode r = Out.JSON.createObjectNode();
        for (Map.Entry<String, ShareGroupDescription> e : new TreeMap<>(admin.describeShareGroups(groups).all().get()).entrySet()) {
            ShareGroupDescription d = e.getValue();
            ObjectNode g = r.putObject(e.getKey());
            g.put("state", d.groupState().toString());
            g.put("group_epoch", d.groupEpoch());
            g.put("target_assignment_epoch", d.targetAssignmentEpoch());
            ArrayNode ms = g.putArray("members");
            for (ShareMemberDescription m : d.members()) {
                ObjectNode mo = ms.addObject();
                mo.put("member_id", m.consumerId());
                mo.put("client_id", m.clientId());
                mo.put("client_host", m.host());
                mo.put("member_epoch", m.memberEpoch());
                mo.set("assignment", Out.assignment(m.assignment().topicPartitions()));
            }
        }
        return r;
    }

    private static JsonNode describeStreamsGroups(Admin admin, List<String> groups) throws Exception {
        ObjectNode r = Out.JSON.createObjectNode();
        for (Map.Entry<String, StreamsGroupDescription> e : new TreeMap<>(admin.describeStreamsGroups(groups).all().get()).entrySet()) {
            StreamsGroupDescription d = e.getValue();
            ObjectNode g = r.putObject(e.getKey());
            g.put("state", d.groupState().toString());
            g.put("group_epoch", d.groupEpoch());
            g.put("target_assignment_epoch", d.targetAssignmentEpoch());
            g.put("topology_epoch", d.topologyEpoch());
            ArrayNode ms = g.putArray("members");
            for (StreamsGroupMemberDescription m : d.members()) {
                ObjectNode mo = ms.addObject();
                mo.put("member_id", m.memberId());
                mo.put("client_id", m.clientId());
                mo.put("client_host", m.clientHost());
                mo.put("member_epoch", m.memberEpoch());
                mo.put("process_id", m.processId());
                mo.put("classic", m.isClassic());
                streamsTasks(mo.putObject("active"), m.assignment().activeTasks());
                streamsTasks(mo.putObject("standby"), m.assignment().standbyTasks());
                streamsTasks(mo.putObject("warmup"), m.assignment().warmupTasks());
                streamsTasks(mo.putObject("target_active"), m.targetAssignment().activeTasks());
            }
        }
        return r;
    }

    /** streamsTasks puts tasks as subtopology id -> partitions. */
    private static void streamsTasks(ObjectNode into, Collection<StreamsGroupMemberAssignment.TaskIds> tasks) {
        tasks.forEach(ti -> {
            ArrayNode ps = into.putArray(ti.subtopologyId());
            ti.partitions().forEach(ps::add);
        });
    }
}

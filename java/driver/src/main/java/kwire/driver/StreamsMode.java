package kwire.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Mode "streams": a Kafka Streams application (application.id = group)
 * copying input to output with a stateless map or, with count, counting
 * records by key in a state store (a changelog topic; standby tasks with
 * standby_replicas), on the classic protocol (the streams partition
 * assignor over JoinGroup/SyncGroup) or, with group_protocol "streams",
 * KIP-1071's StreamsGroupHeartbeat (standby replicas are then the
 * broker's group.streams.num.standby.replicas).
 *
 * <p>Args: group (application.id), client_id, input, output, group_protocol
 * (classic|streams), threads, processing_guarantee (at_least_once|exactly_once_v2),
 * commit_interval_ms, session_timeout_ms (classic only), count (stateful),
 * standby_replicas (classic only), leave_on_close (close with
 * LEAVE_GROUP: a classic Streams member otherwise sends no LeaveGroup),
 * fetch_max_wait_ms (its consumers' fetch.max.wait.ms: fewer idle fetches).
 *
 * <p>Reports: {@code streams_state} for every state change, {@code streams_tasks}
 * (per stream thread: consumer client id, active and standby tasks with
 * their partitions) when the application becomes RUNNING and whenever its
 * tasks change, {@code streams_error} for an uncaught exception,
 * {@code streams_processed} (records processed so far, when the count
 * changed, checked every 200 ms, and at close). Reports name
 * the application in application_id, not group: the groups truth
 * (internal/gen) holds consumer groups.
 * Ready: the first RUNNING.
 */
final class StreamsMode {
    private StreamsMode() {}

    static void run(Task t) throws Exception {
        JsonNode a = t.args;
        String app = Main.str(a, "group", "kwire-java-streams");
        String clientId = Main.str(a, "client_id", app);
        Path state = Files.createTempDirectory("kwire-streams-");
        Properties p = t.props(clientId);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.STATE_DIR_CONFIG, state.toString());
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class.getName());
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.toString(Main.num(a, "threads", 1)));
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Integer.toString(Main.num(a, "commit_interval_ms", 1000)));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, Main.str(a, "processing_guarantee", "at_least_once"));
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, Main.str(a, "group_protocol", "classic"));
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        if (a.hasNonNull("fetch_max_wait_ms")) {
            p.put(StreamsConfig.consumerPrefix("fetch.max.wait.ms"), a.get("fetch_max_wait_ms").asText());
        }
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, Integer.toString(Main.num(a, "standby_replicas", 0)));
        if (a.hasNonNull("session_timeout_ms")) {
            p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), a.get("session_timeout_ms").asText());
        }
        AtomicLong processed = new AtomicLong();
        StreamsBuilder b = new StreamsBuilder();
        KStream<byte[], byte[]> in = b.<byte[], byte[]>stream(Main.str(a, "input", "")).peek((k, v) -> processed.incrementAndGet());
        if (Main.bool(a, "count", false)) {
            in.groupByKey().count().toStream().to(Main.str(a, "output", ""), Produced.with(Serdes.ByteArray(), Serdes.Long()));
        } else {
            in.mapValues(v -> v).to(Main.str(a, "output", ""));
        }
        String[] last = {""};
        try (KafkaStreams ks = new KafkaStreams(b.build(), p)) {
            ks.setStateListener((to, from) -> {
                ObjectNode n = report(t, "streams_state", app, clientId);
                n.put("from", from.toString());
                n.put("to", to.toString());
                t.out.send(n);
                if (to == KafkaStreams.State.RUNNING) {
                    synchronized (last) {
                        last[0] = tasks(t, ks, app, clientId, "");
                    }
                    t.out.ready();
                }
            });
            ks.setUncaughtExceptionHandler(e -> {
                ObjectNode n = report(t, "streams_error", app, clientId);
                n.put("error", Out.error(e));
                t.out.send(n);
                return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            ks.start();
            long reported = 0;
            while (!t.await(Duration.ofMillis(200))) {
                if (ks.state() == KafkaStreams.State.ERROR || ks.state() == KafkaStreams.State.NOT_RUNNING) {
                    throw new IllegalStateException("streams application stopped: " + ks.state());
                }
                if (ks.state() == KafkaStreams.State.RUNNING) {
                    synchronized (last) {
                        last[0] = tasks(t, ks, app, clientId, last[0]);
                    }
                }
                long now = processed.get();
                if (now != reported) {
                    reported = now;
                    processed(t, a, app, clientId, now);
                }
            }
            CloseOptions co = CloseOptions.timeout(Duration.ofSeconds(10));
            if (Main.bool(a, "leave_on_close", false)) {
                co = co.withGroupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP);
            }
            ks.close(co);
        } finally {
            processed(t, a, app, clientId, processed.get());
        }
    }

    private static void processed(Task t, JsonNode a, String app, String clientId, long records) {
        ObjectNode n = report(t, "streams_processed", app, clientId);
        n.put("topic", Main.str(a, "input", ""));
        n.put("records", records);
        t.out.send(n);
    }

    static ObjectNode report(Task t, String kind, String group, String clientId) {
        ObjectNode n = t.out.report(kind);
        n.put("application_id", group); // not "group": the groups truth is of consumer groups
        n.put("client_id", clientId);
        return n;
    }

    /**
     * tasks reports the local threads' tasks unless they are prev (the
     * threads as last reported), and returns them.
     */
    private static String tasks(Task t, KafkaStreams ks, String app, String clientId, String prev) {
        ObjectNode n = report(t, "streams_tasks", app, clientId);
        ArrayNode threads = n.putArray("threads");
        for (ThreadMetadata tm : ks.metadataForLocalThreads()) {
            ObjectNode th = threads.addObject();
            th.put("thread", tm.threadName());
            th.put("consumer_client_id", tm.consumerClientId());
            taskSet(th.putObject("active"), tm.activeTasks());
            taskSet(th.putObject("standby"), tm.standbyTasks());
        }
        String now = threads.toString();
        if (!now.equals(prev)) {
            t.out.send(n);
        }
        return now;
    }

    private static void taskSet(ObjectNode into, Set<TaskMetadata> tasks) {
        new TreeMap<String, TaskMetadata>(tasks.stream().collect(Collectors.toMap(x -> x.taskId().toString(), x -> x)))
                .forEach((id, task) -> into.set(id, Out.assignment(task.topicPartitions())));
    }
}

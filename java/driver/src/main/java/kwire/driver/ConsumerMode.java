package kwire.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Mode "consumer": one KafkaConsumer group member, classic protocol
 * (JoinGroup/SyncGroup; assignor range or cooperative-sticky) or KIP-848
 * (group_protocol "consumer", optional server assignor), until stopped or
 * done.
 *
 * <p>Args: client_id, group, topics, instance_id (static membership,
 * KIP-345), group_protocol (classic|consumer), assignor
 * (range|cooperative-sticky, classic only), remote_assignor (uniform|range,
 * KIP-848 only), session_timeout_ms, heartbeat_ms, max_poll_interval_ms,
 * max_poll_records, auto_offset_reset (earliest), isolation (read_committed),
 * commit (auto|sync|async|none; default sync: after every poll),
 * auto_commit_interval_ms, slow_poll_ms (once, after the first records, the
 * poll loop blocks this long: past max.poll.interval.ms the client leaves the
 * group by itself, KIP-62), worker (field report 4: records go to a pool of
 * threads and each is committed alone when it finishes, out of order; even
 * offsets take worker_delay_ms longer; worker_in_order: one thread, no
 * delay; worker_hold: the record at that offset never finishes, on a thread
 * of its own), connections_max_idle_ms, records (stop after this many),
 * ready_at_start (ready before the first assignment), turn (hang, no_commit,
 * stall) at turn_at_ms (Unix milliseconds; the consumer health states of issue
 * 41): from then on the member no longer polls (hang: its heartbeat thread
 * keeps it in the group; keep max_poll_interval_ms above the rest of the run),
 * polls on but commits nothing (no_commit), or polls no more and commits the
 * offsets it committed last again every stall_commit_ms, default 1000 (stall).
 *
 * <p>Ready: once the member first owns partitions. Closing sends LeaveGroup
 * (not for a static member).
 */
final class ConsumerMode {
    private ConsumerMode() {}

    static Properties props(Task t, Member m, JsonNode a) {
        Properties p = t.props(m.clientId);
        p.put("group.id", m.group);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("auto.offset.reset", Main.str(a, "auto_offset_reset", "earliest"));
        p.put("interceptor.classes", Probe.Interceptor.class.getName());
        String protocol = Main.str(a, "group_protocol", "classic");
        p.put("group.protocol", protocol);
        if (m.instanceId != null) {
            p.put("group.instance.id", m.instanceId);
        }
        if (protocol.equals("classic")) {
            String assignor = Main.str(a, "assignor", "range");
            p.put("partition.assignment.strategy", switch (assignor) {
                case "range" -> Probe.Range.class.getName();
                case "cooperative-sticky" -> Probe.Cooperative.class.getName();
                default -> throw new IllegalArgumentException("unknown assignor " + assignor + " (range, cooperative-sticky)");
            });
            // Not allowed with group.protocol=consumer (the broker has them).
            put(p, "session.timeout.ms", a, "session_timeout_ms");
            put(p, "heartbeat.interval.ms", a, "heartbeat_ms");
        } else {
            String ra = Main.str(a, "remote_assignor", "");
            if (!ra.isEmpty()) {
                p.put("group.remote.assignor", ra);
            }
        }
        put(p, "max.poll.interval.ms", a, "max_poll_interval_ms");
        put(p, "max.poll.records", a, "max_poll_records");
        put(p, "auto.commit.interval.ms", a, "auto_commit_interval_ms");
        put(p, "connections.max.idle.ms", a, "connections_max_idle_ms");
        String iso = Main.str(a, "isolation", "");
        if (!iso.isEmpty()) {
            p.put("isolation.level", iso);
        }
        return p;
    }

    private static void put(Properties p, String key, JsonNode a, String field) {
        if (a.hasNonNull(field)) {
            p.put(key, Integer.toString(a.get(field).asInt()));
        }
    }

    static List<String> topics(JsonNode a) {
        List<String> ts = new ArrayList<>();
        a.path("topics").forEach(n -> ts.add(n.asText()));
        if (ts.isEmpty()) {
            throw new IllegalArgumentException("no topics");
        }
        return ts;
    }

    static void run(Task t) throws Exception {
        JsonNode a = t.args;
        Member m = new Member(t.out, Main.str(a, "group", ""), Main.str(a, "client_id", "kwire-java-consumer"),
                Main.str(a, "instance_id", ""));
        String commit = Main.str(a, "commit", "sync");
        String turn = Main.str(a, "turn", "");
        long turnAt = a.path("turn_at_ms").asLong(0);
        Map<TopicPartition, OffsetAndMetadata> last = new java.util.HashMap<>();
        boolean worker = Main.bool(a, "worker", false);
        Properties p = props(t, m, a);
        p.put("enable.auto.commit", Boolean.toString(commit.equals("auto")));
        long limit = Main.num(a, "records", 0);
        long slowPoll = Main.num(a, "slow_poll_ms", 0);
        Probe.member = m;
        m.onAssigned = () -> {
            if (!m.owned().isEmpty()) {
                t.out.ready();
            }
        };
        if (Main.bool(a, "ready_at_start", false)) {
            t.out.ready();
        }
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p);
             Worker w = worker ? new Worker(m, Main.num(a, "worker_delay_ms", 50), Main.num(a, "worker_hold", -1),
                     Main.bool(a, "worker_in_order", false)) : null) {
            m.consumer.set(c);
            t.onStop(c::wakeup);
            c.subscribe(topics(a), m);
            long n = 0;
            boolean slept = false;
            try {
                while (!t.stopped() && (limit == 0 || n < limit)) {
                    if (!turn.isEmpty() && turnAt > 0 && System.currentTimeMillis() >= turnAt) {
                        ObjectNode r = m.stamp(m.report("turned"));
                        r.put("turn", turn);
                        t.out.send(r);
                        turnAt = 0;
                        if (turn.equals("no_commit")) {
                            commit = "none";
                        } else {
                            turned(t, c, m, turn, last, Main.num(a, "stall_commit_ms", 1000));
                            break;
                        }
                    }
                    ConsumerRecords<byte[], byte[]> rs;
                    try {
                        rs = c.poll(Duration.ofMillis(200));
                    } catch (WakeupException e) {
                        break;
                    }
                    if (w != null) {
                        w.drain(c); // commit what finished, in the order it finished
                    }
                    if (rs.isEmpty()) {
                        continue;
                    }
                    n += rs.count();
                    m.consumed(rs);
                    if (w != null) {
                        rs.forEach(w::submit);
                    } else {
                        commit(c, m, commit, rs, last);
                    }
                    if (slowPoll > 0 && !slept) {
                        slept = true;
                        ObjectNode r = m.stamp(m.report("slow_poll"));
                        r.put("ms", slowPoll);
                        t.out.send(r);
                        t.await(Duration.ofMillis(slowPoll)); // no poll: past max.poll.interval.ms the client leaves
                    }
                }
            } catch (WakeupException e) {
                // The stop's wakeup hit a call other than the poll (a
                // commitSync): the member closes all the same.
                if (!t.stopped()) {
                    throw e;
                }
            }
            if (w != null) {
                w.finish(c);
            }
            ObjectNode r = m.stamp(m.report("closing"));
            r.put("records", n);
            t.out.send(r);
        }
    }

    /**
     * turned runs a hang or a stall until the task is stopped: no poll, and
     * for a stall the offsets committed last committed again every everyMs.
     */
    private static void turned(Task t, KafkaConsumer<?, ?> c, Member m, String turn,
            Map<TopicPartition, OffsetAndMetadata> last, long everyMs) throws InterruptedException {
        switch (turn) {
            case "hang" -> t.awaitStop();
            case "stall" -> {
                while (!t.await(Duration.ofMillis(everyMs))) {
                    try {
                        c.commitSync(last);
                        m.commit("stall", last, null);
                    } catch (WakeupException e) {
                        return;
                    } catch (Exception e) {
                        m.commit("stall", last, e);
                    }
                }
            }
            default -> throw new IllegalArgumentException("unknown turn " + turn + " (hang, no_commit, stall)");
        }
    }

    /** commit commits a poll's records the way the task asked; last gets what a sync commit got accepted. */
    private static void commit(KafkaConsumer<?, ?> c, Member m, String how, ConsumerRecords<?, ?> rs,
            Map<TopicPartition, OffsetAndMetadata> last) {
        Map<TopicPartition, OffsetAndMetadata> o = new java.util.HashMap<>();
        for (TopicPartition tp : rs.partitions()) {
            var l = rs.records(tp);
            o.put(tp, new OffsetAndMetadata(l.get(l.size() - 1).offset() + 1));
        }
        switch (how) {
            case "sync" -> {
                try {
                    c.commitSync(o);
                    last.putAll(o);
                    m.commit("sync", o, null);
                } catch (WakeupException e) {
                    throw e;
                } catch (Exception e) {
                    m.commit("sync", o, e);
                }
            }
            case "async" -> c.commitAsync(o, (off, err) -> m.commit("async", o, err));
            case "auto", "none" -> { }
            default -> throw new IllegalArgumentException("unknown commit " + how + " (auto, sync, async, none)");
        }
    }

    /**
     * Worker is field report 4's framework: records of one partition are
     * processed by two threads at once and each record's offset is committed
     * as soon as that record is done, so n+1 can be committed before n (and n
     * never, if the process dies in between). In order, one thread does
     * every record as it comes. With a hold offset, that record is
     * processed on a thread of its own and never finishes (until the client
     * closes): n held, n+1 done and committed first, as in the field
     * report's experiment.
     * Every finished record is reported ({@code processed}), the held one
     * when it starts ({@code held}).
     */
    static final class Worker implements AutoCloseable {
        private final Member m;
        private final long delayMs, hold;
        private final boolean inOrder;
        private final ExecutorService pool, side;
        private final LinkedBlockingQueue<ConsumerRecord<?, ?>> done = new LinkedBlockingQueue<>();
        private int inflight; // poll thread only

        Worker(Member m, long delayMs, long hold, boolean inOrder) {
            this.m = m;
            this.delayMs = delayMs;
            this.hold = hold;
            this.inOrder = inOrder;
            this.pool = Executors.newFixedThreadPool(inOrder ? 1 : 2);
            this.side = Executors.newSingleThreadExecutor();
        }

        void submit(ConsumerRecord<?, ?> r) {
            if (r.offset() == hold) { // not in flight: finish does not wait for it
                side.execute(() -> {
                    m.out.send(Member.record(m.report("held"), r));
                    try {
                        Thread.sleep(Long.MAX_VALUE); // until close interrupts it
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                });
                return;
            }
            inflight++;
            pool.execute(() -> {
                try {
                    if (!inOrder && r.offset() % 2 == 0) {
                        Thread.sleep(delayMs);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
                m.out.send(Member.record(m.report("processed"), r));
                done.add(r);
            });
        }

        /** drain commits each finished record by itself (commitSync on the poll thread). */
        void drain(KafkaConsumer<?, ?> c) {
            ConsumerRecord<?, ?> r;
            while ((r = done.poll()) != null) {
                commitOne(c, r);
            }
        }

        private void commitOne(KafkaConsumer<?, ?> c, ConsumerRecord<?, ?> r) {
            inflight--;
            var o = Member.next(r);
            try {
                c.commitSync(o);
                m.commit("worker", o, null);
            } catch (WakeupException e) {
                throw e;
            } catch (Exception e) {
                m.commit("worker", o, e);
            }
        }

        /** finish waits (up to 5 s) for the records in flight and commits them as they finish. */
        void finish(KafkaConsumer<?, ?> c) throws InterruptedException {
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (inflight > 0 && System.nanoTime() < end) {
                ConsumerRecord<?, ?> r = done.poll(100, TimeUnit.MILLISECONDS);
                if (r == null) {
                    continue;
                }
                try {
                    commitOne(c, r);
                    drain(c);
                } catch (WakeupException e) {
                    // the stop's wakeup, once: go on committing
                }
            }
        }

        @Override
        public void close() {
            pool.shutdownNow();
            side.shutdownNow();
        }
    }
}

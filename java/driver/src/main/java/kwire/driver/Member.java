package kwire.driver;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.Comparator;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * Member reports one consumer group member's life as internal/gen's
 * groupReport lines: every assignment ({@code owned}: the whole owned set,
 * with consumer.groupMetadata()'s member id and generation, the KIP-848
 * member epoch for group.protocol=consumer), every revocation and loss
 * ({@code revoked}, {@code lost}), every commit ({@code commit}: the offsets
 * and the broker's verdict) and the records each poll gave the application
 * ({@code consumed}, per partition, with the first and last offset).
 */
final class Member implements ConsumerRebalanceListener {
    final Out out;
    final String group, clientId, instanceId;
    final AtomicReference<Consumer<?, ?>> consumer = new AtomicReference<>();
    private static final Comparator<TopicPartition> ORDER =
            Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);
    private final Set<TopicPartition> owned = new TreeSet<>(ORDER);
    /** onAssigned runs after every assignment callback (e.g. ready once owning partitions). */
    Runnable onAssigned = () -> {};
    /** beforeRevoke runs in onPartitionsRevoked before the report (e.g. a commit). */
    java.util.function.Consumer<Collection<TopicPartition>> beforeRevoke = tps -> {};

    Member(Out out, String group, String clientId, String instanceId) {
        this.out = out;
        this.group = group;
        this.clientId = clientId;
        this.instanceId = instanceId == null || instanceId.isEmpty() ? null : instanceId;
    }

    /** report starts a report stamped with the group, client id and instance id. */
    ObjectNode report(String kind) {
        ObjectNode n = out.report(kind);
        n.put("group", group);
        n.put("client_id", clientId);
        if (instanceId != null) {
            n.put("instance_id", instanceId);
        }
        return n;
    }

    /** stamp adds member_id and generation from the client's group metadata now. */
    ObjectNode stamp(ObjectNode n) {
        Consumer<?, ?> c = consumer.get();
        if (c != null) {
            try {
                ConsumerGroupMetadata m = c.groupMetadata();
                n.put("member_id", m.memberId());
                n.put("generation", m.generationId());
            } catch (RuntimeException e) {
                n.put("member_error", Out.error(e));
            }
        }
        return n;
    }

    synchronized Set<TopicPartition> owned() {
        Set<TopicPartition> c = new TreeSet<>(ORDER);
        c.addAll(owned);
        return c;
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> tps) {
        ObjectNode n;
        synchronized (this) {
            owned.addAll(tps);
            n = stamp(report("owned"));
            n.set("assignment", Out.assignment(owned));
        }
        n.set("added", Out.assignment(tps));
        out.send(n);
        onAssigned.run();
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> tps) {
        beforeRevoke.accept(tps);
        gone("revoked", tps);
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> tps) {
        gone("lost", tps);
    }

    private void gone(String kind, Collection<TopicPartition> tps) {
        ObjectNode n;
        synchronized (this) {
            owned.removeAll(tps);
            n = stamp(report(kind));
        }
        n.set("assignment", Out.assignment(tps));
        out.send(n);
    }

    /** consumed reports a poll's records per partition. */
    void consumed(ConsumerRecords<?, ?> rs) {
        for (TopicPartition tp : rs.partitions()) {
            var list = rs.records(tp);
            if (list.isEmpty()) {
                continue;
            }
            ObjectNode n = report("consumed");
            n.put("topic", tp.topic());
            n.put("partition", tp.partition());
            n.put("records", list.size());
            n.put("first_offset", list.get(0).offset());
            n.put("last_offset", list.get(list.size() - 1).offset());
            out.send(n);
        }
    }

    /** record adds a record's topic, partition and offset to n. */
    static ObjectNode record(ObjectNode n, ConsumerRecord<?, ?> r) {
        n.put("topic", r.topic());
        n.put("partition", r.partition());
        n.put("offset", r.offset());
        return n;
    }

    /** commit reports a commit: how (sync, async, worker, txn), its offsets, and err (null: accepted). */
    void commit(String how, Map<TopicPartition, OffsetAndMetadata> offsets, Exception err) {
        Map<TopicPartition, Long> o = new HashMap<>();
        offsets.forEach((tp, om) -> o.put(tp, om.offset()));
        ObjectNode n = stamp(report("commit"));
        n.put("how", how);
        n.set("offsets", Out.offsets(o));
        n.put("ok", err == null);
        if (err != null) {
            n.put("error", Out.error(err));
        }
        out.send(n);
    }

    /** next returns the offsets that commit everything up to rec. */
    static Map<TopicPartition, OffsetAndMetadata> next(ConsumerRecord<?, ?> rec) {
        return Map.of(new TopicPartition(rec.topic(), rec.partition()), new OffsetAndMetadata(rec.offset() + 1));
    }
}

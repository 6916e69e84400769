package kwire.driver;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerInterceptor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Configurable;
import org.apache.kafka.common.TopicPartition;

/**
 * Probe instruments a classic-protocol member from inside the client:
 * {@link Assignor} wraps the real assignor so that the leader reports its
 * plan and every member the assignment it synced (groupReport kinds plan and
 * sync, as kgo's recBalancer does), and {@link Interceptor} reports every
 * commit the broker accepted, auto commits included ({@code committed}). The
 * client instantiates both by class name, so they find the member through
 * {@link #member}: one consumer per driver JVM.
 */
final class Probe {
    static volatile Member member;

    private Probe() {}

    /** Assignor delegates to range or cooperative-sticky and reports. */
    abstract static class Assignor implements ConsumerPartitionAssignor, Configurable {
        private final ConsumerPartitionAssignor real;
        private ObjectNode plan; // the leader's plan, sent with its own assignment

        Assignor(ConsumerPartitionAssignor real) {
            this.real = real;
        }

        @Override
        public void configure(Map<String, ?> configs) {
            if (real instanceof Configurable c) {
                c.configure(configs);
            }
        }

        @Override
        public ByteBuffer subscriptionUserData(Set<String> topics) {
            return real.subscriptionUserData(topics);
        }

        @Override
        public GroupAssignment assign(Cluster metadata, GroupSubscription subs) {
            GroupAssignment ga = real.assign(metadata, subs);
            Member m = member;
            if (m != null) {
                ObjectNode n = m.report("plan");
                n.put("protocol", name());
                ObjectNode plan = n.putObject("plan");
                ObjectNode inst = Out.JSON.createObjectNode();
                ga.groupAssignment().forEach((id, a) -> plan.set(id, Out.assignment(a.partitions())));
                subs.groupSubscription().forEach((id, s) -> s.groupInstanceId().ifPresent(i -> inst.put(id, i)));
                if (!inst.isEmpty()) {
                    n.set("plan_instances", inst);
                }
                ObjectNode topics = n.putObject("topics");
                subs.groupSubscription().values().stream().flatMap(s -> s.topics().stream()).distinct().sorted()
                        .forEach(t -> topics.put(t, metadata.partitionCountForTopic(t) == null ? 0 : metadata.partitionCountForTopic(t)));
                synchronized (this) {
                    this.plan = n;
                }
            }
            return ga;
        }

        @Override
        public void onAssignment(Assignment a, ConsumerGroupMetadata meta) {
            real.onAssignment(a, meta);
            Member m = member;
            if (m == null) {
                return;
            }
            ObjectNode p;
            synchronized (this) {
                p = plan;
                plan = null;
            }
            if (p != null) { // the leader: its id and generation are known only now
                p.put("member_id", meta.memberId());
                p.put("generation", meta.generationId());
                m.out.send(p);
            }
            ObjectNode n = m.report("sync");
            n.put("member_id", meta.memberId());
            n.put("generation", meta.generationId());
            n.put("protocol", name());
            n.set("assignment", Out.assignment(a.partitions()));
            m.out.send(n);
        }

        @Override
        public List<RebalanceProtocol> supportedProtocols() {
            return real.supportedProtocols();
        }

        @Override
        public short version() {
            return real.version();
        }

        @Override
        public String name() {
            return real.name();
        }
    }

    /** Range is the classic range assignor, reporting. */
    public static final class Range extends Assignor {
        public Range() {
            super(new RangeAssignor());
        }
    }

    /** Cooperative is the cooperative-sticky assignor, reporting. */
    public static final class Cooperative extends Assignor {
        public Cooperative() {
            super(new CooperativeStickyAssignor());
        }
    }

    /** Interceptor reports accepted commits (onCommit: success only). */
    public static final class Interceptor implements ConsumerInterceptor<Object, Object> {
        @Override
        public ConsumerRecords<Object, Object> onConsume(ConsumerRecords<Object, Object> records) {
            return records;
        }

        @Override
        public void onCommit(Map<TopicPartition, OffsetAndMetadata> offsets) {
            Member m = member;
            if (m == null) {
                return;
            }
            Map<TopicPartition, Long> o = new java.util.HashMap<>();
            offsets.forEach((tp, om) -> o.put(tp, om.offset()));
            ObjectNode n = m.stamp(m.report("committed"));
            n.set("offsets", Out.offsets(o));
            m.out.send(n);
        }

        @Override
        public void close() {}

        @Override
        public void configure(Map<String, ?> configs) {}
    }

}

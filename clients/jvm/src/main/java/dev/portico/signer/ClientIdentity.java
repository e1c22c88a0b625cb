package dev.portico.signer;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Who is calling: the app's version and platform, sent with every request and covered by its
 * signature.
 *
 * <p>The gateway maps {@code X-Client-Version} to an API version (its compatibility buckets) and
 * refuses apps older than a service's minimum, so the version is part of what the signature
 * protects: a proxy cannot move a request into another bucket without breaking it.
 */
public final class ClientIdentity {
    /** The field carrying the app version. */
    public static final String VERSION_FIELD = "X-Client-Version";
    /** The field carrying the platform. */
    public static final String PLATFORM_FIELD = "X-Client-Platform";

    private final String appVersion;
    private final String platform;

    /**
     * @param appVersion the app's version as released, e.g. {@code 2.4.1}
     * @param platform e.g. {@code android}, {@code iphone}, {@code web}; {@code null} sends none
     */
    public ClientIdentity(String appVersion, String platform) {
        this.appVersion = Objects.requireNonNull(appVersion, "appVersion");
        if (appVersion.isEmpty()) throw new IllegalArgumentException("appVersion must not be empty");
        this.platform = platform;
    }

    /** An identity without a platform. */
    public ClientIdentity(String appVersion) {
        this(appVersion, null);
    }

    public String appVersion() {
        return appVersion;
    }

    /** The platform, or {@code null} when none is sent. */
    public String platform() {
        return platform;
    }

    /** The fields to send, in order: {@code X-Client-Version}, then {@code X-Client-Platform} if set. */
    public List<Map.Entry<String, String>> fields() {
        List<Map.Entry<String, String>> fields = new ArrayList<>(2);
        fields.add(Fields.entry(VERSION_FIELD, appVersion));
        if (platform != null) fields.add(Fields.entry(PLATFORM_FIELD, platform));
        return Collections.unmodifiableList(fields);
    }

    @Override
    public boolean equals(Object other) {
        if (!(other instanceof ClientIdentity)) return false;
        ClientIdentity that = (ClientIdentity) other;
        return appVersion.equals(that.appVersion) && Objects.equals(platform, that.platform);
    }

    @Override
    public int hashCode() {
        return Objects.hash(appVersion, platform);
    }

    @Override
    public String toString() {
        return "ClientIdentity[appVersion=" + appVersion + ", platform=" + platform + "]";
    }
}
